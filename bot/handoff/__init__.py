"""Handoff to a person: a conversation passes from the bot to an operator and back.

`desk.py` is the state machine (bot → waiting → human → bot), decided by compare-and-set on
the conversation's state so two operators pressing Take at once get one winner; `place.py`
mirrors each handoff into the operators' Slack channel; `relay.py` is the gateway's side
(messages held and relayed, operator messages taken in, a tool's request switched after the
turn's final reply); `commands.py` the user's `/human` and `/stop`; `timeouts.py` the queue
timeout; `feed.py` the admin view's live events.
"""
