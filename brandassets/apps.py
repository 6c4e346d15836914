from django.apps import AppConfig


class BrandAssetsConfig(AppConfig):
    name = "brandassets"
    verbose_name = "Brand assets"

    def ready(self) -> None:
        from brandassets.receivers import asset_registry_sync_now, asset_registry_sync_queue
        from groundtruth.signals import ingest_command_finished, ingest_queued, registry_pushed

        ingest_queued.connect(asset_registry_sync_queue, dispatch_uid="brandassets-sync-after-ingest-request")
        ingest_command_finished.connect(asset_registry_sync_now, dispatch_uid="brandassets-sync-after-ingest-command")
        registry_pushed.connect(asset_registry_sync_queue, dispatch_uid="brandassets-sync-after-registry-push")
