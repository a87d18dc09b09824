"""Retail after-sales: four customer requests in a row, each building on what the earlier ones revealed.

Skill: multi_step_workflows. The user (1) asks for the tracking number of an order, (2) returns or exchanges one of
its items, (3) reports another shipment that is stuck, which needs a logistics claim for the issue named in its
tracking events, and (4) asks how much the item from step 2 refunds once the order's stacked coupons are shared
out. The requests are revealed one at a time; the last one is answered with a number computed by the agent.
"""

from __future__ import annotations

from typing import Literal

from spade_envs.tooluse import Instruction, ToolError, ToolUseEnv, match_answer, tool_call

ITEMS = ["Trail Running Shoes", "Merino Wool Sweater", "Insulated Water Bottle", "Rain Jacket", "Hiking Backpack 30L"]
ITEMS += ["Headlamp", "Fleece Pullover", "Yoga Mat", "Bluetooth Speaker", "Pour-Over Coffee Set", "Desk Lamp"]
CARRIERS = {"UPS": "1Z", "FedEx": "78", "DHL": "JD", "USPS": "94"}  # carrier -> tracking number prefix
CITIES = ["Oakland, CA", "Reno, NV", "Denver, CO", "Omaha, NE", "Columbus, OH", "Memphis, TN", "Allentown, PA"]
REASONS = {
    "return": ["it arrived scratched", "it is not what I expected", "I ordered it twice by mistake"],
    "exchange": ["it is the wrong size", "I would like it in a different color", "the one I got has a defect"],
}
EXCEPTIONS = {
    "lost": [
        "EXCEPTION: parcel not found at the hub, the carrier has declared it lost",
        "EXCEPTION: scan trail ended, package reported lost in transit",
    ],
    "damaged": [
        "EXCEPTION: package damaged in transit, outer box crushed",
        "EXCEPTION: parcel reached the hub damaged and leaking",
    ],
    "delayed": [
        "EXCEPTION: delivery delayed by a severe storm, no new date yet",
        "EXCEPTION: shipment delayed, held for customs inspection",
    ],
}
REFUND_RULE = (
    "Refund rule: percentage coupons are applied first, one after another, each to the running total; fixed-amount "
    "coupons are subtracted after that. Every discount is shared among the order's items in proportion to their "
    "prices, so an item's refund is its price minus its share of all discounts, rounded to the cent only at the end."
)


def _money(cents: float) -> str:
    return f"${cents / 100:,.2f}"


class RetailAfterSalesEnv(ToolUseEnv):
    max_turns = 16
    domain = "retail"

    def setup(self) -> list[Instruction]:
        rng = self.rng
        ids = [f"W{n}" for n in rng.sample(range(1000000, 9999999), 3)]
        self.main, self.stuck = ids[0], ids[1]  # the third order is a normal shipment: a wrong target for a claim
        self.orders: dict[str, dict] = {}
        self.shipments: dict[str, dict] = {}
        skus = iter(rng.sample(range(10000, 99999), 12))
        names = iter(rng.sample(ITEMS, 11))
        self.issue = rng.choice(sorted(EXCEPTIONS))  # what went wrong with the stuck shipment
        for oid, status in zip(ids, ["delivered", "exception", "in transit"]):
            items = [
                {"sku": f"SKU-{next(skus)}", "name": next(names), "price": rng.randint(12, 180) * 100 + 99}
                for _ in range(rng.randint(2, 3) if oid != self.main else rng.randint(3, 4))
            ]
            carrier = rng.choice(sorted(CARRIERS))
            tracking = CARRIERS[carrier] + str(rng.randrange(10**11, 10**12))
            self.orders[oid] = {
                "status": "delivered" if status == "delivered" else "shipped",
                "items": items,
                "carrier": carrier,
                "tracking": tracking,
                "coupons": self._coupons(items),
            }
            self.shipments[tracking] = {"carrier": carrier, "status": status, "events": self._events(status)}
        order = self.orders[self.main]
        self.item = rng.choice(order["items"])
        self.kind = rng.choice(["return", "exchange"])
        self.returns: list[dict] = []
        self.claims: list[dict] = []
        self.refund = self._refund(order, self.item)
        self.by_order = rng.random() < 0.5  # the user names the stuck shipment by order or by tracking number
        stuck_tracking = self.orders[self.stuck]["tracking"]
        where = (
            f"my other order {self.stuck}" if self.by_order else f"the package with tracking number {stuck_tracking}"
        )
        self.reason = rng.choice(REASONS[self.kind])
        wants = f"return the {self.item['name']}" if self.kind == "return" else f"exchange the {self.item['name']}"
        how_much = (
            "How much will I get back for the item I'm returning"
            if self.kind == "return"
            else "If the exchange falls through you will refund me instead: how much would I get back for it"
        )
        return [
            Instruction(
                f"Hi! Where is my order {self.main}? Please give me just its tracking number.",
                answer=lambda a: match_answer(a, order["tracking"]),
            ),
            Instruction(f"Thanks. I'd like to {wants} from that order, because {self.reason}.", state=self._returned),
            Instruction(
                f"Also, {where} seems stuck. Please check its tracking and open a claim with the carrier "
                "for the right issue.",
                state=self._claimed,
            ),
            Instruction(
                f"{how_much}, after the order's coupons? Just the amount, please.",
                answer=lambda a: match_answer(a, round(self.refund / 100, 2)),
            ),
        ]

    def _coupons(self, items: list[dict]) -> list[dict]:
        """1-2 percentage and 1-2 fixed coupons, listed in shuffled order; sometimes a shipping-only one."""
        rng = self.rng
        subtotal = sum(i["price"] for i in items)
        n_pct, n_fixed = rng.randint(1, 2), rng.randint(1, 2)
        pct = zip(rng.sample(["SPRING", "VIP", "LOYAL", "FLASH"], n_pct), rng.sample([5, 10, 15, 20, 25], n_pct))
        fixed = zip(rng.sample(["SAVE", "TAKE", "GIFT"], n_fixed), rng.sample([5, 10, 15, 20], n_fixed))
        found = [{"code": f"{code}{p}", "percent": p} for code, p in pct]
        found += [{"code": f"{code}{d}", "fixed": d * 100} for code, d in fixed if d * 400 < subtotal]
        if rng.random() < 0.5:
            found.append({"code": "FREESHIP", "shipping": True})
        return rng.sample(found, len(found))

    def _events(self, status: str) -> list[str]:
        rng = self.rng
        day, route = rng.randint(1, 20), rng.sample(CITIES, 3)
        events = [
            f"May {day} 09:{rng.randint(10, 59)} picked up in {route[0]}",
            f"May {day + 1} 18:{rng.randint(10, 59)} arrived at sorting hub {route[1]}",
        ]
        if status == "delivered":
            events.append(f"May {day + 3} 14:{rng.randint(10, 59)} delivered in {route[2]}, left at front door")
        elif status == "exception":
            events.append(f"May {day + 2} 07:{rng.randint(10, 59)} {rng.choice(EXCEPTIONS[self.issue])}")
        else:
            events.append(f"May {day + 2} 06:{rng.randint(10, 59)} departed {route[1]}, on the way to {route[2]}")
        return events

    def _refund(self, order: dict, item: dict) -> float:
        """The REFUND_RULE in cents: percent coupons multiply, fixed ones are pro-rated by price."""
        subtotal = sum(i["price"] for i in order["items"])
        net = float(item["price"])
        for c in order["coupons"]:
            net *= 1 - c.get("percent", 0) / 100
        return net - sum(c.get("fixed", 0) for c in order["coupons"]) * item["price"] / subtotal

    def _returned(self) -> bool:
        want = {"order": self.main, "sku": self.item["sku"], "kind": self.kind}
        return len(self.returns) == 1 and all(self.returns[0][k] == v for k, v in want.items())

    def _claimed(self) -> bool:
        tracking = self.orders[self.stuck]["tracking"]
        return len(self.claims) == 1 and self.claims[0] == {"tracking": tracking, "issue": self.issue}

    def _order(self, order_id: str) -> dict:
        order = self.orders.get(order_id.strip().upper().lstrip("#"))
        if order is None:
            raise ToolError(f"no order {order_id!a}; list_orders shows your orders")
        return order

    # -- tools --------------------------------------------------------------------------------------------------
    def tool_list_orders(self) -> str:
        """List your recent orders with their status."""
        return "\n".join(f"{oid}: {o['status']}, {len(o['items'])} items" for oid, o in self.orders.items())

    def tool_get_order(self, order_id: str) -> str:
        """Show an order: status, carrier, tracking number and items.

        Args:
            order_id: The order number, e.g. W1234567.
        """
        o = self._order(order_id)
        items = "\n".join(f"- {i['sku']} {i['name']}, {_money(i['price'])}" for i in o["items"])
        items += f"\nCoupons: {', '.join(c['code'] for c in o['coupons'])} (details: get_coupons)"
        head = f"Order {order_id.strip().upper().lstrip('#')}: {o['status']}"
        return f"{head}\nCarrier {o['carrier']}, tracking {o['tracking']}\n{items}"

    def tool_create_return(self, order_id: str, item_sku: str, kind: Literal["return", "exchange"], reason: str) -> str:
        """Open a return (refund) or an exchange (replacement) for one item of a delivered order.

        Args:
            order_id: The order number.
            item_sku: The SKU of the item, e.g. SKU-12345.
            kind: "return" for a refund, "exchange" for a replacement.
            reason: Why the customer sends it back.
        """
        oid = order_id.strip().upper().lstrip("#")
        o = self._order(oid)
        if o["status"] != "delivered":
            raise ToolError(f"order {oid} is not delivered yet; only delivered items can be sent back")
        item = next((i for i in o["items"] if i["sku"] == item_sku.strip().upper()), None)
        if item is None:
            raise ToolError(f"order {oid} has no item {item_sku!a}; get_order lists its SKUs")
        if any(r["sku"] == item["sku"] for r in self.returns):
            raise ToolError(f"{item['sku']} already has an open return")
        if not reason.strip():
            raise ToolError("a reason is required")
        self.returns.append({"order": oid, "sku": item["sku"], "kind": kind, "reason": reason.strip()})
        return f"RMA-{len(self.returns) + 4100}: {kind} of {item['name']} ({item['sku']}) from order {oid} created."

    def tool_get_shipment(self, tracking_id: str) -> str:
        """Show a shipment's status and tracking events.

        Args:
            tracking_id: The tracking number.
        """
        s = self.shipments.get(tracking_id.strip().upper())
        if s is None:
            raise ToolError(f"no shipment {tracking_id!a}; get_order shows an order's tracking number")
        return f"{s['carrier']} {tracking_id.strip().upper()}: {s['status']}\n" + "\n".join(s["events"])

    def tool_open_logistics_claim(self, tracking_id: str, issue: Literal["lost", "damaged", "delayed"]) -> str:
        """Open a claim with the carrier for a shipment that has an exception.

        Args:
            tracking_id: The tracking number.
            issue: What went wrong with the shipment.
        """
        tid = tracking_id.strip().upper()
        s = self.shipments.get(tid)
        if s is None or s["status"] != "exception":
            raise ToolError(f"{tracking_id!a} is not a shipment with an exception; claims need one")
        if any(c["tracking"] == tid for c in self.claims):
            raise ToolError(f"a claim for {tid} is already open")
        self.claims.append({"tracking": tid, "issue": issue})
        return f"Claim CLM-{len(self.claims) + 770} opened with {s['carrier']}: {issue} shipment {tid}."

    def tool_get_coupons(self, order_id: str) -> str:
        """List the coupons applied to an order and the rule for refunds.

        Args:
            order_id: The order number.
        """
        lines = []
        for c in self._order(order_id)["coupons"]:
            if "percent" in c:
                lines.append(f"- {c['code']}: {c['percent']}% off")
            elif "fixed" in c:
                lines.append(f"- {c['code']}: {_money(c['fixed'])} off the order")
            else:
                lines.append(f"- {c['code']}: free shipping (does not change item refunds)")
        return "\n".join(lines) + "\nShipping is not refunded. " + REFUND_RULE

    # Distractor: shipping costs play no part in any request.
    def tool_estimate_shipping_cost(self, weight_kg: float, express: bool = False) -> str:
        """Estimate what sending a parcel of a given weight costs.

        Args:
            weight_kg: Parcel weight in kilograms.
            express: Whether to ship express.
        """
        if not 0 < weight_kg <= 70:
            raise ToolError("weight_kg must be between 0 and 70")
        return f"Estimated shipping: {_money(round((599 + 180 * weight_kg) * (1.8 if express else 1)))}"

    # -- solution -----------------------------------------------------------------------------------------------
    def solution(self) -> list[str]:
        """Answer, act, act, compute: each request uses what get_order showed for the first one."""
        tracking = self.orders[self.stuck]["tracking"]
        return [
            tool_call("get_order", order_id=self.main),
            f"<answer>{self.orders[self.main]['tracking']}</answer>",
            tool_call(
                "create_return", order_id=self.main, item_sku=self.item["sku"], kind=self.kind, reason=self.reason
            ),
            *([tool_call("get_order", order_id=self.stuck)] if self.by_order else []),
            tool_call("get_shipment", tracking_id=tracking),
            tool_call("open_logistics_claim", tracking_id=tracking, issue=self.issue),
            tool_call("get_coupons", order_id=self.main),
            f"<answer>{self.refund / 100:.2f}</answer>",
        ]
