"""slack-bolt's internals the Slack channel uses, behind one door: Bolt is handed our `auth.test`.

Bolt's single-team authorization makes its own `auth.test`, once, on the first event, and keeps
the answer (`AsyncSingleTeamAuthorization.auth_test_result`); with a token revoked by then it
would drop every event with a log line of its own, and never tell us. So it is handed the answer
the channel got at start, and a revoked token shows where we see it: in our calls. Bolt has no
public way to reach its middleware (the app's `_async_middleware_list`): this module is the only
one that names it. A release without it gets no answer handed over and Bolt makes its own call on
the first event, as it does by default: one more call, and the log says so once.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.middleware.authorization.async_single_team_authorization import (
    AsyncSingleTeamAuthorization,
)

log = logging.getLogger(__name__)

_said: list[bool] = []  # the fallback is logged once per process


def hand_auth_test(app: AsyncApp, auth: Any) -> bool:
    """Give Bolt's single-team authorization the `auth.test` answer we have; False if this Bolt
    keeps it where we cannot reach (it then makes its own call on the first event)."""
    middleware = getattr(app, "_async_middleware_list", None)
    handed = False
    for each in middleware if isinstance(middleware, list) else ():
        if isinstance(each, AsyncSingleTeamAuthorization) and hasattr(each, "auth_test_result"):
            each.auth_test_result = auth
            handed = True
    if not handed and not _said:
        _said.append(True)
        log.info(
            "slack-bolt: its authorization middleware is not where it was"
            " (AsyncApp._async_middleware_list): Bolt makes its own auth.test on the first event"
        )
    return handed
