"""Bank transfer recovery: pay a payee although the first attempts fail, each error saying how to fix it.

Skill: error_recovery. Per seed, 2-3 of four obstacles are active: the payee is not registered yet, the amount is
above the per-transfer limit, the source account is short of funds, or a one-time security code is required.
Every error message names its cause and the tools that fix it, so a careful agent recovers and retries.
"""

from __future__ import annotations

import math

from spade_envs.tooluse import Instruction, ToolError, ToolUseEnv, tool_call

PAYEES = ["Harbor Plumbing", "Northwind Dental", "Maple Street Daycare", "Brightside Solar", "Juniper Vet Clinic"]
PAYEES += ["Atlas Movers", "Cedar Roofing", "Lumen Optics", "Riverside Tutoring", "Quill Printing"]
OTHER_PAYEES = ["City Water Utility", "Greenline Energy", "Oakwood Apartments", "Metro Transit Pass"]
CHECKING = ["Everyday Checking", "Joint Checking", "Bills Account", "Main Current Account"]
SAVINGS = ["Rainy Day Savings", "Holiday Savings", "Emergency Fund", "Goal Saver"]
COUNTRIES = ["DE", "NL", "FR", "ES", "IT", "BE"]
OBSTACLES = ["unregistered", "limit", "funds", "otp"]


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def _cents(amount: float) -> int:
    """Validate a tool amount in dollars and convert it to whole cents (money is kept in integers)."""
    if not math.isfinite(amount) or not 0.01 <= amount <= 10_000_000:
        raise ToolError(f"amount must be a positive number of dollars, got {amount}")
    return round(amount * 100)


class BankTransferRecoveryEnv(ToolUseEnv):
    max_turns = 24
    domain = "banking"

    def setup(self) -> Instruction:
        rng = self.rng
        self.obstacles = set(rng.sample(OBSTACLES, rng.choice([2, 3])))
        self.limit = rng.choice([500, 750, 1000, 1500, 2000]) * 100
        if "limit" in self.obstacles:  # needs 2 or 3 transfers
            dollars = rng.randrange(self.limit // 100 + 40, 3 * self.limit // 100, 5)
        else:
            dollars = rng.randrange(self.limit // 300, self.limit // 100, 5)
        self.amount = dollars * 100 + rng.choice([0, 0, 50, 25])
        # Accounts: the named source, a decoy checking account, a rich savings account and a nearly empty one.
        short = "funds" in self.obstacles
        source = (
            rng.randint(self.amount // 5, self.amount * 4 // 5) if short else self.amount + rng.randint(2, 300) * 100
        )
        rows = [("CHK", source), ("CHK", rng.randint(50, 400) * 100)]
        rows += [("SAV", self.amount + rng.randint(10, 50) * 10000), ("SAV", rng.randint(20, 300) * 100)]
        names = rng.sample(CHECKING, 2) + rng.sample(SAVINGS, 2)
        ids = [f"{kind}-{num}" for (kind, _), num in zip(rows, rng.sample(range(1000, 9999), 4))]
        self.source, self.savings = ids[0], ids[2]
        order = rng.sample(range(4), 4)  # listing order differs per seed
        self.accounts: dict[str, dict] = {}
        for i in order:
            kind = "checking" if i < 2 else "savings"
            self.accounts[ids[i]] = {"name": names[i], "type": kind, "balance": rows[i][1], "overdraft": 0}
        # Payees: the bank's directory holds the target, a look-alike and the already registered ones.
        self.target = rng.choice(PAYEES)
        lookalike = self.target + rng.choice([" Supply", " Holdings", " Ltd"])
        self.directory = {p: self._iban() for p in [self.target, lookalike, *OTHER_PAYEES]}
        registered = rng.sample(OTHER_PAYEES, 2) + ([] if "unregistered" in self.obstacles else [self.target])
        self.payees = {p: self.directory[p] for p in registered}
        self.transfers: dict[str, dict] = {}  # transfer id -> from, payee, amount, status
        self.next_tx = rng.randint(1000, 8999)
        self.otp_codes = [str(rng.randint(100000, 999999)) for _ in range(40)]
        self.otp_issued = 0  # how many codes request_otp has handed out; the last one is the valid one
        self.otp_valid: str | None = None
        src = self.accounts[self.source]["name"]
        return Instruction(
            text=f"Please pay {_money(self.amount)} to {self.target} from my {src} account. "
            "Don't let any of my accounts go negative. Reply done when the payment has gone through.",
            state=self._paid_exactly,
        )

    def _iban(self) -> str:
        return self.rng.choice(COUNTRIES) + f"{self.rng.randint(10, 99)}" + f"{self.rng.randrange(10**17, 10**18)}"

    def _paid_exactly(self) -> bool:
        """The target got exactly the amount from the named account, nobody else got paid, nothing overdrawn."""
        done = [t for t in self.transfers.values() if t["status"] == "completed"]
        right = all(t["payee"] == self.target and t["from"] == self.source for t in done)
        solvent = all(a["balance"] >= 0 for a in self.accounts.values())
        return right and solvent and sum(t["amount"] for t in done) == self.amount

    def _account(self, ref: str) -> str:
        """Resolve an account id or name (case-insensitive) to its id."""
        for acc_id, acc in self.accounts.items():
            if ref.strip().upper() == acc_id or ref.strip().lower() == acc["name"].lower():
                return acc_id
        raise ToolError(f"unknown account {ref!a}; call list_accounts to see your account ids")

    def _debit(self, acc_id: str, cents: int) -> None:
        acc = self.accounts[acc_id]
        if acc["balance"] + acc["overdraft"] < cents:
            raise ToolError(
                f"insufficient funds: {acc['name']} ({acc_id}) has {_money(acc['balance'])} available. Move money "
                "from a savings account first with internal_transfer(from_account, to_account, amount)."
            )
        acc["balance"] -= cents

    # -- tools --------------------------------------------------------------------------------------------------
    def tool_list_accounts(self) -> str:
        """List your accounts with their ids, types and balances."""
        return "\n".join(
            f"{i}: {a['name']} ({a['type']}) balance {_money(a['balance'])}" for i, a in self.accounts.items()
        )

    def tool_list_payees(self) -> str:
        """List the payees registered for outgoing payments."""
        return "\n".join(f"{name}: {iban}" for name, iban in self.payees.items())

    def tool_lookup_payee_directory(self, query: str) -> str:
        """Search the bank's directory of businesses for a payee's IBAN.

        Args:
            query: Part of the payee's name.
        """
        text = query.strip().lower()
        hits = [f"{p}: IBAN {iban}" for p, iban in self.directory.items() if text and text in p.lower()]
        if not hits:
            raise ToolError(f"no directory entry matches {query!a}")
        return "\n".join(hits)

    def tool_add_payee(self, payee: str, iban: str) -> str:
        """Register a payee so that payments to them are allowed.

        Args:
            payee: The payee's full name as in the directory.
            iban: The payee's IBAN.
        """
        match = next((p for p in self.directory if p.lower() == payee.strip().lower()), None)
        if match is None:
            raise ToolError(f"{payee!a} is not in the bank directory; use lookup_payee_directory to find the name")
        if match in self.payees:
            raise ToolError(f"{match} is already registered")
        if iban.replace(" ", "").upper() != self.directory[match]:
            raise ToolError(f"IBAN {iban!a} does not match the directory record of {match}")
        self.payees[match] = self.directory[match]
        return f"Registered payee {match} ({self.directory[match]})."

    def tool_get_limits(self) -> str:
        """Show the payment limits and security rules of your accounts."""
        otp = "required for every payment to a payee" if "otp" in self.obstacles else "not required"
        return (
            f"Per-transfer limit for payments to payees: {_money(self.limit)}. Internal transfers between your "
            f"own accounts: no limit. One-time security code: {otp}."
        )

    def tool_transfer(self, from_account: str, payee: str, amount: float) -> str:
        """Pay a registered payee from one of your accounts.

        Args:
            from_account: Account id or name to pay from.
            payee: Name of a registered payee.
            amount: Amount in dollars.
        """
        acc_id = self._account(from_account)
        match = next((p for p in self.payees if p.lower() == payee.strip().lower()), None)
        if match is None:
            raise ToolError(
                f"payee {payee!a} is not registered. Find their IBAN with lookup_payee_directory(query) "
                "and register them with add_payee(payee, iban)."
            )
        cents = _cents(amount)
        if cents > self.limit:
            raise ToolError(
                f"{_money(cents)} exceeds the per-transfer limit of {_money(self.limit)}. Split the "
                f"payment into several transfers of at most {_money(self.limit)} each."
            )
        self._debit(acc_id, cents)  # funds are reserved at once, even while a security code is pending
        tx = f"TX{self.next_tx}"
        self.next_tx += 1
        held = "otp" in self.obstacles
        self.transfers[tx] = {
            "from": acc_id,
            "payee": match,
            "amount": cents,
            "status": "pending_otp" if held else "completed",
        }
        if held:
            return (
                f"Transfer {tx} of {_money(cents)} to {match} is on hold: it needs a one-time security code. "
                f"Call request_otp() and then confirm_transfer(transfer_id='{tx}', otp=<code>)."
            )
        return f"Transfer {tx} of {_money(cents)} to {match} completed."

    def tool_request_otp(self) -> str:
        """Send a fresh one-time security code to your phone (it replaces any earlier code)."""
        if self.otp_issued >= len(self.otp_codes):
            self.otp_codes.append(str(self.rng.randint(100000, 999999)))
        self.otp_valid = self.otp_codes[self.otp_issued]
        self.otp_issued += 1
        return f"Security code sent to your phone: {self.otp_valid}. It is valid for one confirmation."

    def tool_confirm_transfer(self, transfer_id: str, otp: str) -> str:
        """Confirm a transfer that is on hold with a one-time security code.

        Args:
            transfer_id: The id of the held transfer, e.g. TX1234.
            otp: The security code from request_otp.
        """
        tx = self.transfers.get(transfer_id.strip().upper())
        if tx is None or tx["status"] != "pending_otp":
            raise ToolError(f"no transfer {transfer_id!a} is waiting for a security code")
        if self.otp_valid is None or otp.strip() != self.otp_valid:
            raise ToolError("wrong or expired security code; call request_otp() for a new one")
        self.otp_valid = None
        tx["status"] = "completed"
        return f"Transfer {transfer_id.strip().upper()} of {_money(tx['amount'])} to {tx['payee']} completed."

    def tool_cancel_transfer(self, transfer_id: str) -> str:
        """Cancel a transfer that is still on hold and release its reserved funds.

        Args:
            transfer_id: The id of the held transfer.
        """
        tx = self.transfers.get(transfer_id.strip().upper())
        if tx is None or tx["status"] != "pending_otp":
            raise ToolError(f"no transfer {transfer_id!a} is on hold; completed transfers cannot be cancelled")
        tx["status"] = "cancelled"
        self.accounts[tx["from"]]["balance"] += tx["amount"]
        return f"Transfer {transfer_id.strip().upper()} cancelled; {_money(tx['amount'])} released."

    def tool_internal_transfer(self, from_account: str, to_account: str, amount: float) -> str:
        """Move money between two of your own accounts (instant, no limit, no security code).

        Args:
            from_account: Account id or name to take the money from.
            to_account: Account id or name to put the money in.
            amount: Amount in dollars.
        """
        src, dst = self._account(from_account), self._account(to_account)
        if src == dst:
            raise ToolError("from_account and to_account must differ")
        cents = _cents(amount)
        self._debit(src, cents)
        self.accounts[dst]["balance"] += cents
        return (
            f"Moved {_money(cents)}. {src} balance {_money(self.accounts[src]['balance'])}, "
            f"{dst} balance {_money(self.accounts[dst]['balance'])}."
        )

    # Distractor: an overdraft "fixes" a shortfall too, but breaks the user's rule that no account goes negative.
    def tool_request_overdraft(self, account_id: str, amount: float) -> str:
        """Grant an account an overdraft so that its balance may go below zero.

        Args:
            account_id: Account id or name.
            amount: Overdraft size in dollars.
        """
        acc_id = self._account(account_id)
        self.accounts[acc_id]["overdraft"] = _cents(amount)
        return f"{acc_id} may now go {_money(_cents(amount))} below zero."

    # -- solution -----------------------------------------------------------------------------------------------
    def solution(self) -> list[str]:
        """Fix each active obstacle up front, then pay in limit-sized parts, confirming each with a fresh code."""
        turns = []
        if "unregistered" in self.obstacles:
            turns.append(tool_call("lookup_payee_directory", query=self.target))
            turns.append(tool_call("add_payee", payee=self.target, iban=self.directory[self.target]))
        shortfall = self.amount - self.accounts[self.source]["balance"]
        if shortfall > 0:
            top_up = -(-shortfall // 10000) * 100  # round up to whole hundreds of dollars
            turns.append(
                tool_call("internal_transfer", from_account=self.savings, to_account=self.source, amount=top_up)
            )
        parts, left = [], self.amount
        while left > 0:
            parts.append(min(left, self.limit))
            left -= parts[-1]
        for k, cents in enumerate(parts):
            turns.append(tool_call("transfer", from_account=self.source, payee=self.target, amount=cents / 100))
            if "otp" in self.obstacles:
                turns.append(tool_call("request_otp"))
                code = self.otp_codes[self.otp_issued + k]
                turns.append(tool_call("confirm_transfer", transfer_id=f"TX{self.next_tx + k}", otp=code))
        return [*turns, "<answer>done</answer>"]
