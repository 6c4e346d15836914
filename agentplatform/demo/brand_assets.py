"""Demo brand assets: a local brand git repository and the brand-assets.yml that lists them.

`demo_brand_assets_create(root=..., registry_repo=...)` (called by `seed_demo`) makes
`<root>/acme-brand`, a git repo with light and dark SVG logos, a favicon, an app icon, a font
(WOFF and TTF), App Store and Google Play badges, and PNG files that the registry does not list
(so they must never be served), then commits `brand-assets.yml` into the registry repository
(a git work tree that already holds `sources.yml`). Running it again changes nothing when the
files are the same.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from agentplatform.demo.git_repositories import demo_repository_commit

BRAND_REPO_NAME = "acme/brand"
BRAND_DIRECTORY = "acme-brand"


# --- generated artwork ----------------------------------------------------------------------
def png_bytes(width: int, height: int, pixel: Callable[[int, int], tuple[int, int, int, int]]) -> bytes:
    """A true-colour RGBA PNG; `pixel(x, y)` gives each pixel's colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type: none
        for x in range(width):
            rows.extend(pixel(x, y))
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


def _disc(size: int, colour: tuple[int, int, int], background: tuple[int, int, int, int]) -> Callable:
    centre, radius_squared = (size - 1) / 2, (size * 0.42) ** 2

    def pixel(x: int, y: int) -> tuple[int, int, int, int]:
        inside = (x - centre) ** 2 + (y - centre) ** 2 <= radius_squared
        return (*colour, 255) if inside else background

    return pixel


def ico_bytes(png: bytes, size: int) -> bytes:
    """A one-image .ico holding a PNG (the form every current browser reads)."""
    dimension = 0 if size >= 256 else size  # 0 means 256 in an ICO directory entry
    header = struct.pack("<HHH", 0, 1, 1)
    entry = struct.pack("<BBBBHHII", dimension, dimension, 0, 0, 1, 32, len(png), 6 + 16)
    return header + entry + png


def _logo_svg(*, text: str, foreground: str) -> bytes:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="240" height="64" viewBox="0 0 240 64">'
        f'<circle cx="32" cy="32" r="24" fill="#3b5bdb"/>'
        f'<text x="68" y="42" font-family="sans-serif" font-size="28" fill="{foreground}">{text}</text>'
        "</svg>\n"
    ).encode()


def _badge_svg(*, store: str) -> bytes:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="180" height="54" viewBox="0 0 180 54">'
        '<rect width="180" height="54" rx="8" fill="#000"/>'
        f'<text x="90" y="34" text-anchor="middle" font-family="sans-serif" font-size="16" fill="#fff">{store}</text>'
        "</svg>\n"
    ).encode()


def font_bytes(*, flavor: str | None) -> bytes:
    """A small but valid TrueType font, "Acme Sans", with a space and a capital A (WOFF when
    flavor is "woff")."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    def glyph(draw: Callable[[TTGlyphPen], None] | None = None) -> object:
        pen = TTGlyphPen(None)
        if draw is not None:
            draw(pen)
        return pen.glyph()

    def letter_a(pen: TTGlyphPen) -> None:
        for contour in (((50, 0), (300, 700), (550, 0)), ((200, 150), (300, 450), (400, 150))):
            pen.moveTo(contour[0])
            for point in contour[1:]:
                pen.lineTo(point)
            pen.closePath()

    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder([".notdef", "space", "A"])
    builder.setupCharacterMap({0x20: "space", 0x41: "A"})
    builder.setupGlyf({".notdef": glyph(), "space": glyph(), "A": glyph(letter_a)})
    builder.setupHorizontalMetrics({".notdef": (600, 0), "space": (300, 0), "A": (600, 50)})
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": "Acme Sans", "styleName": "Regular"})
    builder.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    builder.setupPost()
    # Fixed timestamps (seconds since 1904) so that the same font is the same bytes on every run.
    builder.setupHead(unitsPerEm=1000, created=3_786_825_600, modified=3_786_825_600)
    if flavor:
        builder.font.flavor = flavor
    output = io.BytesIO()
    builder.save(output)
    return output.getvalue()


def brand_repo_files() -> dict[str, bytes]:
    """Every file of the demo brand repository, listed ones and unlisted ones."""
    app_icon = png_bytes(192, 192, _disc(192, (59, 91, 219), (255, 255, 255, 255)))
    favicon_png = png_bytes(32, 32, _disc(32, (59, 91, 219), (0, 0, 0, 0)))
    return {
        "README.md": b"# Acme brand kit\n\nThe canonical Acme logos, icons, fonts and store badges.\n",
        "logos/acme-light.svg": _logo_svg(text="Acme", foreground="#111111"),
        "logos/acme-dark.svg": _logo_svg(text="Acme", foreground="#f8f9fa"),
        "logos/acme-docs.svg": _logo_svg(text="Acme Docs", foreground="#111111"),
        "web/favicon.ico": ico_bytes(favicon_png, 32),
        "icons/app-icon-192.png": app_icon,
        "fonts/AcmeSans-Regular.woff": font_bytes(flavor="woff"),
        "fonts/AcmeSans-Regular.ttf": font_bytes(flavor=None),
        "badges/app-store.svg": _badge_svg(store="App Store"),
        "badges/google-play.svg": _badge_svg(store="Google Play"),
        # Not listed in brand-assets.yml: must never be served, whatever their extension.
        "logos/acme-legacy-2019.png": png_bytes(64, 64, _disc(64, (200, 30, 30), (255, 255, 255, 255))),
        "marketing/hero-banner.png": png_bytes(96, 32, lambda x, y: (240, 240, 240, 255)),
        "icons/unused-icon.png": png_bytes(16, 16, _disc(16, (0, 160, 0), (0, 0, 0, 0))),
    }


def brand_assets_yml(*, brand_repo_url: str) -> str:
    return f"""\
# Brand assets served by /assets. Every asset is listed here explicitly: a file of the brand repo
# that is not listed (there are legacy PNGs in it) is never served, whatever its extension.
defaults:
  ref: main
repos:
  {BRAND_REPO_NAME}:
    url: {brand_repo_url}
products:
  acme-app:
    logo:
      - {{repo: {BRAND_REPO_NAME}, path: logos/acme-light.svg, theme: light, format: svg, width: 240, height: 64,
         description: Primary logo for light backgrounds}}
      - {{repo: {BRAND_REPO_NAME}, path: logos/acme-dark.svg, theme: dark, format: svg, width: 240, height: 64,
         description: Primary logo for dark backgrounds}}
    favicon:
      - {{repo: {BRAND_REPO_NAME}, path: web/favicon.ico, format: ico, width: 32, height: 32}}
    app-icon:
      - {{repo: {BRAND_REPO_NAME}, path: icons/app-icon-192.png, format: png, width: 192, height: 192}}
    font:
      - {{repo: {BRAND_REPO_NAME}, path: fonts/AcmeSans-Regular.woff, format: woff, description: Acme Sans for the web}}
      - {{repo: {BRAND_REPO_NAME}, path: fonts/AcmeSans-Regular.ttf, format: ttf, description: Acme Sans desktop}}
    store-badge:
      - {{repo: {BRAND_REPO_NAME}, path: badges/app-store.svg, description: Download on the App Store}}
      - {{repo: {BRAND_REPO_NAME}, path: badges/google-play.svg, description: Get it on Google Play}}
  acme-docs:
    logo:
      - {{repo: {BRAND_REPO_NAME}, path: logos/acme-docs.svg, theme: light, description: Documentation site logo}}
    favicon:
      - {{repo: {BRAND_REPO_NAME}, path: web/favicon.ico}}
"""


def demo_brand_assets_create(*, root: Path, registry_repo: Path) -> None:
    """Creates (or brings up to date) the demo brand repo under `root` and commits
    brand-assets.yml (at BRAND_ASSETS_PATH) into the registry work tree `registry_repo`."""
    brand_repo = Path(root) / BRAND_DIRECTORY
    demo_repository_commit(brand_repo, brand_repo_files(), "Acme brand kit", only_if_changed=True)
    registry_text = brand_assets_yml(brand_repo_url=str(brand_repo.resolve()))
    demo_repository_commit(
        Path(registry_repo),
        {settings.BRAND_ASSETS_PATH: registry_text},
        "List the Acme brand assets",
        only_if_changed=True,
    )
