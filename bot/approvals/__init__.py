"""Approvals before sensitive tools: who is asked, where, and what their answer does.

The tool loop asks the `ApprovalGate` (tools/approval.py) before a call of a tool that needs a
person's yes; `StoredGate` (gate.py) keeps each request in the store and pauses the turn, whose
live message then shows the call with three buttons (prompt.py). `ApprovalDesk` (desk.py) takes
the answer, a button press or a text reply, from the user or from an approver in the operator
place (place.py: a Slack channel), decides the request once, audits it, and resumes the turn on
whichever process holds its conversation; unanswered requests expire into a denial.
"""
