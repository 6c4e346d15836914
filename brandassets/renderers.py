from __future__ import annotations

from typing import Any

from rest_framework.renderers import BaseRenderer, JSONRenderer


class AnyMediaTypeRenderer(BaseRenderer):
    """Lets the content endpoint accept whatever an image or font client sends in `Accept`.

    Without it DRF would answer `Accept: image/png` with 406 before the view runs. The view
    returns the asset bytes itself (an HttpResponse, never rendered here); what this renderer
    does render are error bodies, which stay problem-details JSON whatever was accepted.
    """

    media_type = "*/*"
    format = "bytes"
    charset = None
    render_style = "binary"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, bytes):
            return data
        return JSONRenderer().render(data, renderer_context=renderer_context)
