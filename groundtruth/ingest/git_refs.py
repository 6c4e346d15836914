"""The one rule for a git ref a client or a registry file names (branch, tag or commit SHA).

`git check-ref-format --allow-onelevel` rules, on a portable alphabet: letters, digits and
`. _ / + -`, 1 to 200 characters; no leading `-` (it would read as an option), no part that
starts with `.` or ends with `.lock`, no `..`, no empty part (`//`, a leading or trailing `/`),
no trailing `.`. Git itself would also take characters such as `;`, `#` or non-ASCII letters;
refusing them at the door means a ref that passes here is one git can resolve or report missing,
never one that fails later for its spelling. POST /ingest/repo, sources.yml, brand-assets.yml
and GitRepository.resolve all use it; the OpenAPI schema publishes `REF_PATTERN`.
"""

from __future__ import annotations

import re

REF_MAX_LENGTH = 200
# No lookbehind, so that the OpenAPI schema can publish it (ECMA-262 regular expressions).
# Anchored with \Z (not $, which Python also matches before a final newline); drf-spectacular
# writes it as $ in the schema.
REF_PATTERN = (
    r"^(?!-)(?!/)(?!.*//)(?!.*\.\.)(?!.*(?:^|/)\.)(?!.*\.lock(?:/|\Z))(?!.*[/.]\Z)"
    rf"[A-Za-z0-9._/+-]{{1,{REF_MAX_LENGTH}}}\Z"
)
REF_RULE = (
    f"must be a branch, tag or commit SHA of 1 to {REF_MAX_LENGTH} letters, digits and . _ / + - "
    "(git ref-name rules: no leading '-', "
    "no part starting with '.' or ending in '.lock', no '..', '//' or trailing '/' or '.')"
)
REF_REGEX = re.compile(REF_PATTERN)


def ref_is_valid(ref: str) -> bool:
    return isinstance(ref, str) and REF_REGEX.match(ref) is not None
