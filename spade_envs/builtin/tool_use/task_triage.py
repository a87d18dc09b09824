"""Task triage: apply a bulk request to a task tracker, picking the right tool among near-synonyms.

Skill: tool_selection. Closing, archiving and deleting all make a task "go away", reassigning and snoozing both
"move it off my plate", and a mark_duplicate tool tempts on duplicate clean-ups. The user's request names exactly
one of them for each group of tasks; the world is judged by a full snapshot, so a wrong tool or a task outside the
requested group fails the episode.
"""

from __future__ import annotations

from typing import Literal

from spade_envs.tooluse import Instruction, ToolError, ToolUseEnv, tool_call

TAGS = ["billing", "infra", "frontend", "docs", "security", "mobile"]
PEOPLE = ["Alex", "Dana", "Priya", "Marco", "Lena", "Sam", "Omar", "Yuki"]
TITLES = ["Fix invoice rounding", "Rotate TLS certificates", "Upgrade Postgres", "Dark mode toggle", "Audit IAM roles"]
TITLES += ["Refund queue backlog", "Update VAT rates", "Flaky login test", "Rewrite onboarding guide", "Patch OpenSSL"]
TITLES += ["Lazy-load images", "Crash on Android 14", "API changelog", "Trim CI runners", "Dunning email copy"]
TITLES += ["Backup restore drill", "Push notification opt-in", "Rate limit docs", "Webhook retries", "Date picker bug"]
TITLES += ["Search ranking tweak", "Cache warm-up job", "Offline mode sync", "SSO for admins", "Error page redesign"]
COMMENTS = ["Obsolete after the Q3 migration", "Superseded by the new roadmap", "Reviewed in Monday triage"]
# One request per scenario: x is a tag, p and q are people, d a number of days, note a comment text.
REQUESTS = {
    "close_reassign": "Close (do not delete or archive) every overdue '{x}' task that is not closed yet, and reassign "
    "every unclosed '{x}' task due within the next 7 days to {p}.",
    "archive_snooze": "Archive (don't close or delete) every closed '{x}' task, and snooze each overdue unclosed task "
    "assigned to {p} by {d} days.",
    "delete_comment": "Delete every task whose title starts with '[DUP]' (really delete them, do not archive or close "
    "them), and add the comment '{note}' to every blocked '{x}' task.",
    "handover": "{p} is on leave. Reassign every unclosed task of {p}'s that is due within the next 7 days (overdue "
    "ones included) to {q}, and snooze {p}'s other unclosed tasks by {d} days.",
    "close_comment": "Every blocked '{x}' task is obsolete: close each of them (do not delete or archive) and leave "
    "the comment '{note}' on it.",
}


def _norm(comment: str) -> str:
    """Comments compare without case, surrounding quotes or a final full stop."""
    return " ".join(comment.lower().strip(" .'\"").split())


def _due_text(days: int) -> str:
    return "due today" if days == 0 else f"due in {days}d" if days > 0 else f"overdue by {-days}d"


class TaskTriageEnv(ToolUseEnv):
    max_turns = 20
    domain = "task_tracker"

    def setup(self) -> Instruction:
        rng = self.rng
        kind = rng.choice(sorted(REQUESTS))
        x, p, q = rng.choice(TAGS), *rng.sample(PEOPLE, 2)
        self.team = sorted(rng.sample([t for t in PEOPLE if t not in (p, q)], 4) + [p, q])
        d, note = rng.choice([3, 5, 7, 14]), rng.choice(COMMENTS)
        other = rng.choice([t for t in TAGS if t != x])
        while True:  # redraw until the request touches 3-10 tasks, so that it fits in max_turns
            self.titles = rng.sample(TITLES, len(TITLES))
            rows = [self._random_task() for _ in range(rng.randint(6, 11))]
            # Targets and look-alike decoys per scenario; which tasks must change is then computed from the rules.
            if kind == "close_reassign":
                rows += [self._task(tag=x, due=-rng.randint(1, 9), status="open") for _ in range(2)]
                rows += [
                    self._task(tag=x, due=rng.randint(0, 7), status="blocked"),
                    self._task(tag=x, due=-3, status="closed"),
                    self._task(tag=x, due=rng.randint(9, 20)),
                    self._task(tag=other, due=-2),
                ]
            elif kind == "archive_snooze":
                rows += [self._task(tag=x, status="closed") for _ in range(2)]
                rows += [self._task(who=p, due=-rng.randint(1, 6), status="open"), self._task(tag=x, status="open")]
                rows += [self._task(who=p, due=-2, status="closed"), self._task(tag=other, status="closed")]
            elif kind == "delete_comment":
                rows += [self._task(title="[DUP] " + rows[0]["title"], status="open")]
                rows += [self._task(tag=x, status="blocked") for _ in range(2)]
                rows += [self._task(title="Remove dup invoices"), self._task(tag=other, status="blocked")]
            elif kind == "handover":
                rows += [self._task(who=p, due=rng.randint(-4, 7), status="open") for _ in range(2)]
                rows += [self._task(who=p, due=rng.randint(8, 20), status="open"), self._task(who=p, status="closed")]
            else:
                rows += [self._task(tag=x, status="blocked") for _ in range(2)]
                rows += [self._task(tag=x, status="open"), self._task(tag=other, status="blocked")]
            rng.shuffle(rows)
            start = rng.randint(100, 900)
            self.tasks = {f"T-{start + i}": row for i, row in enumerate(rows)}
            self.plan = self._plan(kind, x, p, q, d, note)
            if 3 <= len(self.plan) <= 10:
                break
        self.expected = self._apply(self._snapshot(), self.plan)
        text = REQUESTS[kind].format(x=x, p=p, q=q, d=d, note=note) + " Reply done when finished."
        return Instruction(text=text, state=lambda: self._snapshot() == self.expected)

    def _random_task(self) -> dict:
        status = self.rng.choice(["open", "open", "open", "blocked", "closed", "closed"])
        return self._task(status=status)

    def _task(
        self, tag: str = "", who: str = "", due: int | None = None, status: str = "open", title: str = ""
    ) -> dict:
        """One task; unspecified fields are drawn at random (titles are unique, popped from a shuffled pool)."""
        rng = self.rng
        return {
            "title": title or self.titles.pop(),
            "tag": tag or rng.choice(TAGS),
            "assignee": who or rng.choice(self.team),
            "due": rng.randint(-10, 25) if due is None else due,
            "status": status,
            "priority": rng.choice(["low", "medium", "high"]),
            "archived": False,
            "comments": [],
            "duplicate_of": "",
        }

    def _plan(self, kind: str, x: str, p: str, q: str, d: int, note: str) -> list[tuple[str, str, object]]:
        """The (task id, tool, argument) changes the request asks for, derived from the rules stated to the user."""
        plan: list[tuple[str, str, object]] = []
        for tid, t in self.tasks.items():
            live = t["status"] != "closed"
            if kind == "close_reassign" and t["tag"] == x and live and t["due"] < 0:
                plan.append((tid, "close_task", None))
            elif kind == "close_reassign" and t["tag"] == x and live and t["due"] <= 7 and t["assignee"] != p:
                plan.append((tid, "reassign_task", p))
            elif kind == "archive_snooze" and t["tag"] == x and not live:
                plan.append((tid, "archive_task", None))
            elif kind == "archive_snooze" and t["assignee"] == p and live and t["due"] < 0:
                plan.append((tid, "snooze_task", d))
            elif kind == "delete_comment" and t["title"].startswith("[DUP]"):
                plan.append((tid, "delete_task", None))
            elif kind == "delete_comment" and t["tag"] == x and t["status"] == "blocked":
                plan.append((tid, "add_comment", note))
            elif kind == "close_comment" and t["tag"] == x and t["status"] == "blocked":
                plan += [(tid, "close_task", None), (tid, "add_comment", note)]
            elif kind == "handover" and t["assignee"] == p and live:
                plan.append((tid, "reassign_task", q) if t["due"] <= 7 else (tid, "snooze_task", d))
        return plan

    def _snapshot(self) -> dict:
        """Everything an action can change, with comments normalised so that quotes and case do not matter."""
        return {tid: {**t, "comments": [_norm(c) for c in t["comments"]]} for tid, t in self.tasks.items()}

    def _apply(self, snap: dict, plan: list[tuple[str, str, object]]) -> dict:
        for tid, tool, arg in plan:
            if tool == "delete_task":
                del snap[tid]
            elif tool == "close_task":
                snap[tid]["status"] = "closed"
            elif tool == "archive_task":
                snap[tid]["archived"] = True
            elif tool == "reassign_task":
                snap[tid]["assignee"] = arg
            elif tool == "snooze_task":
                snap[tid]["due"] += arg
            else:
                snap[tid]["comments"].append(_norm(str(arg)))
        return snap

    def _get(self, task_id: str) -> tuple[str, dict]:
        """Resolve a task id typed by the agent to (canonical id, task)."""
        tid = task_id.strip().upper()
        if tid not in self.tasks:
            raise ToolError(f"no task {task_id!a}; search_tasks shows the task ids")
        return tid, self.tasks[tid]

    def _line(self, tid: str) -> str:
        t = self.tasks[tid]
        extra = " | archived" if t["archived"] else ""
        return f"{tid} | {t['title']} | tag {t['tag']} | {t['assignee']} | {_due_text(t['due'])} | {t['status']}{extra}"

    def _editable(self, task_id: str) -> tuple[str, dict]:
        tid, task = self._get(task_id)
        if task["archived"]:
            raise ToolError(f"{tid} is archived and read-only")
        return tid, task

    # -- tools --------------------------------------------------------------------------------------------------
    def tool_search_tasks(self, query: str) -> str:
        """Find tasks whose title, tag, assignee or status contains the query (an empty query lists all tasks).

        Args:
            query: Text to look for, case-insensitive.
        """
        hits = [
            self._line(tid)
            for tid, t in self.tasks.items()
            if query.strip().lower() in " ".join([t["title"], t["tag"], t["assignee"], t["status"]]).lower()
        ]
        return "\n".join(hits) or f"No task matches {query!a}."

    def tool_list_tasks_by_tag(self, tag: str) -> str:
        """List the tasks that carry a tag.

        Args:
            tag: The tag, e.g. billing.
        """
        hits = [self._line(tid) for tid, t in self.tasks.items() if t["tag"] == tag.strip().lower()]
        return "\n".join(hits) or f"No task has tag {tag!a}. Tags: {', '.join(TAGS)}."

    def tool_get_task(self, task_id: str) -> str:
        """Show one task with its priority and comments.

        Args:
            task_id: The task id, e.g. T-104.
        """
        tid, t = self._get(task_id)
        return f"{self._line(tid)} | priority {t['priority']} | comments: {'; '.join(t['comments']) or 'none'}"

    def tool_close_task(self, task_id: str) -> str:
        """Mark a task as closed (done); it stays in the tracker.

        Args:
            task_id: The task id.
        """
        tid, task = self._editable(task_id)
        if task["status"] == "closed":
            raise ToolError(f"{tid} is already closed")
        task["status"] = "closed"
        return f"{tid} closed."

    def tool_archive_task(self, task_id: str) -> str:
        """Move a task to the archive, where it is kept read-only with its current status.

        Args:
            task_id: The task id.
        """
        tid, task = self._editable(task_id)
        task["archived"] = True
        return f"{tid} archived."

    def tool_delete_task(self, task_id: str) -> str:
        """Delete a task permanently.

        Args:
            task_id: The task id.
        """
        tid, _ = self._get(task_id)
        del self.tasks[tid]
        return f"{tid} deleted."

    def tool_reassign_task(self, task_id: str, assignee: str) -> str:
        """Give a task to another team member.

        Args:
            task_id: The task id.
            assignee: The new assignee's name.
        """
        tid, task = self._editable(task_id)
        who = assignee.strip().title()
        if who not in self.team:
            raise ToolError(f"{assignee!a} is not on the team: {', '.join(self.team)}")
        task["assignee"] = who
        return f"{tid} is now assigned to {who}."

    def tool_snooze_task(self, task_id: str, days: int) -> str:
        """Push a task's due date back by a number of days.

        Args:
            task_id: The task id.
            days: How many days to postpone it (1-60).
        """
        tid, task = self._editable(task_id)
        if not 1 <= days <= 60:
            raise ToolError("days must be between 1 and 60")
        task["due"] += days
        return f"{tid} is now {_due_text(task['due'])}."

    def tool_add_comment(self, task_id: str, text: str) -> str:
        """Add a comment to a task.

        Args:
            task_id: The task id.
            text: The comment text.
        """
        if not text.strip():
            raise ToolError("the comment is empty")
        tid, task = self._editable(task_id)
        task["comments"].append(text.strip().encode("ascii", "replace").decode())
        return f"Comment added to {tid}."

    # Distractors: neither is ever asked for, and both change the task.
    def tool_set_priority(self, task_id: str, priority: Literal["low", "medium", "high"]) -> str:
        """Change a task's priority.

        Args:
            task_id: The task id.
            priority: The new priority.
        """
        tid, task = self._editable(task_id)
        task["priority"] = priority
        return f"{tid} priority set to {priority}."

    def tool_mark_duplicate(self, task_id: str, original_id: str) -> str:
        """Flag a task as a duplicate of another task.

        Args:
            task_id: The duplicate task.
            original_id: The task it duplicates.
        """
        original, _ = self._get(original_id)
        tid, task = self._editable(task_id)
        task["duplicate_of"] = original
        return f"{tid} marked as duplicate of {original}."

    # -- solution -----------------------------------------------------------------------------------------------
    def solution(self) -> list[str]:
        """One call per planned change, with the tool the request names for it."""
        turns = []
        for tid, tool, arg in self.plan:
            extra = {"assignee": arg} if tool == "reassign_task" else {"days": arg} if tool == "snooze_task" else {}
            extra = {"text": arg} if tool == "add_comment" else extra
            turns.append(tool_call(tool, task_id=tid, **extra))
        return [*turns, "<answer>done</answer>"]
