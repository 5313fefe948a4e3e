"""The admin view's schedules page: behind the token, what users wrote escaped, a cancel only
with the page's form token, and a schedule cancelled from it is never fired."""

from __future__ import annotations

import re

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from tests.admin_kit import TOKEN
from tests.conftest import Running, connect, db_rows

BEARER = {"Authorization": f"Bearer {TOKEN}"}
EVIL = "<script>alert(1)</script> water the plants"


async def test_an_admin_sees_and_cancels_a_schedule(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider(
        [Reply(calls=[("schedule_message", {"when": "in 1 hour", "text": EVIL})]), Reply("Done.")]
    )
    app = await running(provider, admin={"token": TOKEN})
    client = await connect(session, app)
    await client.hello()
    await client.ask("remind me")
    [(schedule_id,)] = db_rows(app, "select id from schedules")
    page = f"{app.url}/admin/schedules"
    async with session.get(page) as refused:
        assert refused.status == 401
    async with session.get(page, headers=BEARER) as response:
        html = await response.text()
    assert response.status == 200 and schedule_id in html
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt; water the plants" in html and "<script>" not in html
    )
    found = re.search(r'name="form_token" value="([0-9a-f]+)"', html)
    assert found is not None
    form = {"form_token": found.group(1), "schedule_id": schedule_id}
    async with session.post(page, data=form) as refused:
        assert refused.status == 401  # the token proves the admin, the form token the page
    forged = form | {"form_token": "0" * 64}
    async with session.post(page, data=forged, headers=BEARER) as refused:
        assert refused.status == 403
    assert db_rows(app, "select status from schedules") == [("active",)]
    async with session.post(page, data=form, headers=BEARER, allow_redirects=False) as response:
        assert response.status == 303
    assert db_rows(app, "select status, note from schedules") == [
        ("cancelled", "cancelled by an admin")
    ]
    async with session.post(page, data=form, headers=BEARER, allow_redirects=False) as response:
        assert response.status == 404  # nothing active left to cancel
    async with session.get(f"{page}?done=cancelled", headers=BEARER) as response:
        assert "Cancelled: nothing more of it will be sent." in await response.text()
