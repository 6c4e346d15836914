from django.http import HttpRequest, JsonResponse
from drf_spectacular.utils import extend_schema


@extend_schema(exclude=True)
def ceiling_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok", "service": "agentplatform"})
