"""Our date and time formats (settings.FORMAT_MODULE_PATH), in place of Django's English ones."""
