"""CRM report: answer an aggregate question about deals by paging through customers and reading their records.

Skill: data_retrieval. The customer list is paginated and shows only ids and names, so the agent must walk every
page of the region, open customer records to learn their tier, list the deals of the right customers, and add up
the right stages. The answer is a number or a customer name that no single tool output contains.
"""

from __future__ import annotations

import json

from spade_envs.tooluse import Instruction, ToolError, ToolUseEnv, match_answer, tool_call

REGIONS = ["North", "South", "East", "West", "Central"]
TIERS = ["Gold", "Silver", "Bronze"]
OPEN_STAGES = ["Prospecting", "Proposal", "Negotiation"]
CLOSED_STAGES = ["Closed Won", "Closed Lost"]
BRANDS = ["Acme", "Birch", "Cobalt", "Delta", "Evergreen", "Falcon", "Granite", "Harbor", "Ironwood", "Juniper",
          "Keystone", "Lumen", "Maple", "Nimbus", "Orion", "Pioneer", "Quartz", "Redwood", "Summit"]  # fmt: skip
INDUSTRIES = {"Logistics": "transport", "Foods": "food", "Systems": "software", "Health": "healthcare",
              "Energy": "energy", "Retail": "retail", "Labs": "biotech", "Motors": "automotive"}  # fmt: skip
DEAL_NAMES = ["Renewal", "Expansion", "Pilot", "Upgrade", "Support plan", "New licences", "Onboarding"]
OWNERS = ["Dana Reyes", "Sam Whitfield", "Noor Aziz", "Leo Brandt", "Mei Tanaka", "Ivan Petrov"]
INTROS = ["Quick one for the pipeline review.", "I'm preparing the quarterly board deck.", "Finance needs a number.",
          "Prepping for tomorrow's sales meeting.", "Need this for the regional forecast.", "Hi!"]  # fmt: skip
PAGE_SIZE = 5


class CrmReportEnv(ToolUseEnv):
    max_turns = 16
    domain = "crm"

    def setup(self) -> Instruction:
        self.kind = self.rng.choice(["open_total", "won_total", "top_customer"])
        while True:  # redraw until the question has a clean answer that no single record shows
            self._build_world()
            text, expected = self._draw_question()
            if expected is not None:
                break
        self.expected = expected
        return Instruction(text, answer=lambda given: match_answer(given, expected))

    # -- world building ---------------------------------------------------------------------------------------------
    def _build_world(self) -> None:
        rng = self.rng
        self.regions = sorted(rng.sample(REGIONS, 3))
        count = rng.randint(20, 40)
        names = rng.sample([f"{b} {s}" for b in BRANDS for s in INDUSTRIES], count)
        ids = rng.sample(range(100, 1000), count)
        deal_ids = iter(rng.sample(range(1000, 10000), count * 4))
        self.customers: dict[str, dict] = {}
        self.deals: dict[str, list[dict]] = {}
        for cid, name in zip(ids, names):
            key = f"C-{cid}"
            self.customers[key] = {
                "customer_id": key,
                "name": name,
                "region": rng.choice(self.regions),
                "tier": rng.choices(TIERS, weights=[3, 4, 5])[0],
                "industry": INDUSTRIES[name.split()[1]],
                "account_owner": rng.choice(OWNERS),
                "customer_since": rng.randint(2012, 2024),
            }
            self.deals[key] = [
                {
                    "deal_id": f"D-{next(deal_ids)}",
                    "name": rng.choice(DEAL_NAMES),
                    "amount_usd": rng.randrange(2000, 90001, 250),
                    "stage": rng.choice(OPEN_STAGES + CLOSED_STAGES),
                }
                for _ in range(rng.randint(0, 4))
            ]

    def _in(self, region: str, tier: str | None = None) -> list[str]:
        """Ids of the customers of a region (and tier), in the order the paginated list shows them."""
        return [
            k
            for k, c in sorted(self.customers.items(), key=lambda kv: kv[1]["name"])
            if c["region"] == region and (tier is None or c["tier"] == tier)
        ]

    def _total(self, customer_ids: list[str], stages: list[str], floor: int = 0) -> tuple[int, int]:
        """Sum and number of the deals of these customers in one of ``stages`` and worth at least ``floor``."""
        picked = [
            d["amount_usd"]
            for k in customer_ids
            for d in self.deals[k]
            if d["stage"] in stages and d["amount_usd"] >= floor
        ]
        return sum(picked), len(picked)

    def _draw_question(self) -> tuple[str, str | int | None]:
        rng = self.rng
        self.region, self.tier = rng.choice(self.regions), rng.choice(TIERS)
        self.floor = rng.choice([0, 0, 10000, 20000, 25000, 30000])
        intro = rng.choice(INTROS)
        amounts = {d["amount_usd"] for deals in self.deals.values() for d in deals}
        if len(self._in(self.region)) < 6:  # at least two pages to walk
            return "", None
        if self.kind == "top_customer":
            pipeline = sorted(((self._total([k], OPEN_STAGES)[0], k) for k in self._in(self.region)), reverse=True)
            if pipeline[1][0] == 0 or pipeline[0][0] == pipeline[1][0]:
                return "", None
            text = (
                f"{intro} Which customer in the {self.region} region has the largest open pipeline, meaning the "
                "highest total value of deals that are not closed yet? Answer with the customer's name."
            )
            return text, self.customers[pipeline[0][1]]["name"]
        stages = OPEN_STAGES if self.kind == "open_total" else ["Closed Won"]
        total, deals = self._total(self._in(self.region, self.tier), stages, self.floor)
        if deals < 2 or total in amounts:  # a one-deal answer could be copied from a single tool output
            return "", None
        if self.kind == "open_total":
            ask = f"What is the total value of open deals (not yet closed) for {self.tier}-tier customers"
        else:
            ask = f"How much revenue have we won so far (closed-won deals) from {self.tier}-tier customers"
        only = f", counting only deals of at least ${self.floor:,}" if self.floor else ""
        return f"{intro} {ask} in the {self.region} region{only}? Answer with the dollar amount.", total

    def _customer(self, customer_id: str) -> str:
        key = customer_id.strip().upper()
        if key not in self.customers:
            raise ToolError(f"no customer with id {customer_id!a}; ids look like 'C-123'")
        return key

    # -- tools --------------------------------------------------------------------------------------------------------
    def tool_list_customers(self, region: str, page: int = 1) -> str:
        """List the customers of a region (ids and names), five per page.

        Args:
            region: Sales region name, e.g. "North".
            page: Page number, starting at 1.
        """
        match = [r for r in self.regions if r.lower() == region.strip().lower()]
        if not match:
            raise ToolError(f"unknown region {region!a}. Regions: {', '.join(self.regions)}")
        ids = self._in(match[0])
        pages = max(1, -(-len(ids) // PAGE_SIZE))
        if not 1 <= page <= pages:
            raise ToolError(f"page {page} does not exist; {match[0]} has {pages} page(s)")
        rows = [
            {"customer_id": k, "name": self.customers[k]["name"]} for k in ids[(page - 1) * PAGE_SIZE :][:PAGE_SIZE]
        ]
        head = f"{match[0]} region, page {page} of {pages} ({len(ids)} customers):"
        return head + "\n" + "\n".join(json.dumps(r) for r in rows)

    def tool_get_customer(self, customer_id: str) -> str:
        """Show a customer's full record: region, tier, industry, account owner.

        Args:
            customer_id: Customer id, e.g. "C-123".
        """
        return json.dumps(self.customers[self._customer(customer_id)])

    def tool_list_deals(self, customer_id: str) -> str:
        """List every deal of a customer with its amount and pipeline stage.

        Args:
            customer_id: Customer id, e.g. "C-123".
        """
        key = self._customer(customer_id)
        deals = self.deals[key]
        if not deals:
            return f"{key} has no deals."
        return f"{len(deals)} deal(s) of {key}:\n" + "\n".join(json.dumps(d) for d in deals)

    def tool_get_region_manager(self, region: str) -> str:
        """Show who manages a sales region.

        Args:
            region: Sales region name.
        """
        match = [r for r in self.regions if r.lower() == region.strip().lower()]
        if not match:
            raise ToolError(f"unknown region {region!a}. Regions: {', '.join(self.regions)}")
        return json.dumps({"region": match[0], "manager": OWNERS[REGIONS.index(match[0])]})

    def tool_send_email(self, to: str, subject: str, body: str) -> str:
        """Send an email to a colleague or customer contact.

        Args:
            to: Recipient email address.
            subject: Subject line.
            body: Message text.
        """
        if "@" not in to or not to.isascii():
            raise ToolError(f"{to!a} is not an email address")
        return f"Email to {to.strip()} queued."

    def solution(self) -> list[str]:
        ids = self._in(self.region)
        pages = -(-len(ids) // PAGE_SIZE)
        turns = ["\n".join(tool_call("list_customers", region=self.region, page=p) for p in range(1, pages + 1))]
        if self.kind != "top_customer":  # the tier is only in the full record
            turns.append("\n".join(tool_call("get_customer", customer_id=k) for k in ids))
            ids = self._in(self.region, self.tier)
        turns.append("\n".join(tool_call("list_deals", customer_id=k) for k in ids))
        return turns + [f"<answer>{self.expected}</answer>"]
