"""The admin view's schedules page: behind the token, what users wrote escaped, and a
schedule cancelled from it is never fired."""

from __future__ import annotations

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
    async with session.post(f"{page}/{schedule_id}/cancel") as refused:
        assert refused.status == 401
    assert db_rows(app, "select status from schedules") == [("active",)]
    async with session.get(page, headers=BEARER) as response:
        html = await response.text()
    assert response.status == 200 and schedule_id in html
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt; water the plants" in html and "<script>" not in html
    )
    cancel = f"{page}/{schedule_id}/cancel"
    async with session.post(cancel, headers=BEARER, allow_redirects=False) as response:
        assert response.status == 303
    assert db_rows(app, "select status, note from schedules") == [
        ("cancelled", "cancelled by an admin")
    ]
    async with session.post(cancel, headers=BEARER, allow_redirects=False) as response:
        assert response.status == 404  # nothing active left to cancel
    async with session.get(page, headers=BEARER) as response:
        assert "cancelled" in await response.text()
