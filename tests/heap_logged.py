"""The start of a child script that watches the heap's log (bot/runtime/heap.py): each line
kept in `logged` and printed as it comes; `await logged_lines(n)` waits for n of them."""

LOGGED = """
import asyncio, logging, sys
from bot.runtime import heap

logged = []  # the heap's log lines, printed as they come

class Kept(logging.Handler):
    def emit(self, record):
        logged.append(record.getMessage())
        print(logged[-1], flush=True)

logging.getLogger("bot.runtime").addHandler(Kept())
logging.getLogger("bot.runtime").setLevel(logging.INFO)

async def logged_lines(n):  # the copy runs at idle priority: on a busy machine, later
    async with asyncio.timeout(50):
        while len(logged) < n:
            await asyncio.sleep(0.01)
"""
