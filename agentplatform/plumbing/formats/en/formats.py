"""One way to write a moment across the admin: change lists (agentplatform/plumbing/admin_display.py),
change pages' read-only fields and the history page all show `2026-11-22 19:43` (settings.TIME_ZONE,
UTC), where Django's English formats wrote "Nov. 22, 2026, 7:43 p.m." on some pages only."""

DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i"
