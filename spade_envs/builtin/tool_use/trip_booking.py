"""Trip booking: chain passenger lookup, flight search, seat hold and booking into one correct reservation.

Skill: api_orchestration. Every call needs an id that only an earlier call reveals (passenger id, flight id, hold
id), the right flight is the cheapest one that meets the user's constraint (never simply the cheapest), and the
preferred seat type may be sold out, so the agent must fall back to the user's second choice.
"""

from __future__ import annotations

import datetime
import json
from typing import Literal

from spade_envs.tooluse import Instruction, ToolError, ToolUseEnv, match_answer, tool_call

CITIES = {
    "BOS": "Boston", "ORD": "Chicago", "DEN": "Denver", "SEA": "Seattle", "SFO": "San Francisco",
    "LAX": "Los Angeles", "ATL": "Atlanta", "MIA": "Miami", "JFK": "New York", "AUS": "Austin", "PHX": "Phoenix",
}  # fmt: skip
AIRLINES = {"NA": "Northern Air", "BL": "Blue Lark", "TW": "Tailwind", "PX": "Pacific Express"}
FIRST = ["Maria", "James", "Aisha", "Kenji", "Lucia", "Omar", "Priya", "Tomas", "Elena", "David", "Sofia", "Ravi"]
LAST = ["Lopez", "Chen", "Okafor", "Novak", "Haddad", "Silva", "Berg", "Patel", "Moreau", "Kim"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]  # fmt: skip
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
SEATS = ("window", "aisle", "middle")
SEAT_LETTER = {"window": "A", "middle": "B", "aisle": "C"}


def _hm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


class TripBookingEnv(ToolUseEnv):
    max_turns = 14
    domain = "travel"

    def setup(self) -> Instruction:
        rng = self.rng
        self.origin, self.dest = rng.sample(sorted(CITIES), 2)
        self.date = datetime.date(2025, rng.randint(1, 12), rng.randint(1, 28))
        # Passenger directory: the traveller plus a relative with the same surname and a few strangers.
        first = rng.sample(FIRST, 6)
        last = rng.sample(LAST, 5)
        names = [f"{first[0]} {last[0]}", f"{first[1]} {last[0]}"] + [f"{f} {s}" for f, s in zip(first[2:], last[1:])]
        ids = rng.sample(range(1000, 10000), len(names))
        self.passengers = {f"P-{i}": n for i, n in zip(ids, names)}
        self.traveler, self.traveler_id = names[0], f"P-{ids[0]}"
        self.constraint = self._draw_constraint()
        # Flights on the requested day and the days around it (a wrong date gives plausible but wrong flights).
        self.flights: dict[str, dict] = {}
        self.block = rng.randrange(90, 301, 5)  # nonstop flying time of the route, minutes
        for delta in (-1, 1):
            self._add_flights(self.date + datetime.timedelta(days=delta), rng.randint(3, 5))
        while True:  # redraw the day until the constraint matters: the overall cheapest flight must violate it
            day = self._add_flights(self.date, rng.randint(5, 8))
            ok = [f for f in day if self._meets(f)]
            if len(ok) >= 2 and not self._meets(min(day, key=lambda f: f["fare"])) and not self._tie(day):
                break
            for f in day:
                del self.flights[f["id"]]
        self.target = min(ok, key=lambda f: f["fare"])
        # Seat preference: on the target flight the first choice is sold out about 40% of the time.
        self.prefs = rng.sample(["window", "aisle"], 2)
        self.target["seats"][self.prefs[1]] = rng.randint(1, 6)
        if rng.random() < 0.4:
            self.target["seats"][self.prefs[0]] = 0
        else:
            self.target["seats"][self.prefs[0]] = rng.randint(1, 6)
        self.seat = self.prefs[0] if self.target["seats"][self.prefs[0]] else self.prefs[1]
        self.holds: dict[str, dict] = {}
        self.hold_base = rng.randint(2000, 8999)
        self.codes = ["".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6)) for _ in range(10)]
        self.bookings: list[dict] = []
        when = f"{WEEKDAYS[self.date.weekday()]}, {MONTHS[self.date.month - 1]} {self.date.day}, {self.date.year}"
        text = (
            f"Please book a flight for {self.traveler} from {CITIES[self.origin]} to {CITIES[self.dest]} on {when}. "
            f"{self._constraint_text()}, and among the flights that work I want the cheapest one. "
            f"I'd like {_a(self.prefs[0])} seat; if there are none left, {_a(self.prefs[1])} seat is fine. "
            "Reply with the confirmation code."
        )
        return Instruction(
            text,
            state=self._booked_correctly,
            answer=lambda given: bool(self.bookings) and match_answer(given, self.bookings[-1]["code"]),
        )

    # -- world building ---------------------------------------------------------------------------------------------
    def _draw_constraint(self) -> tuple[str, int]:
        kind = self.rng.choice(["arrive_before", "max_stops", "depart_after"])
        if kind == "arrive_before":
            return kind, self.rng.randrange(12 * 60, 21 * 60 + 1, 30)
        if kind == "depart_after":
            return kind, self.rng.randrange(9 * 60, 14 * 60 + 1, 30)
        return kind, self.rng.choice([0, 1])

    def _constraint_text(self) -> str:
        kind, value = self.constraint
        if kind == "arrive_before":
            return f"I have to land before {_hm(value)}"
        if kind == "depart_after":
            return f"I can't leave before {_hm(value)}"
        return "It has to be a nonstop flight" if value == 0 else "It can have at most one stop"

    def _meets(self, flight: dict) -> bool:
        kind, value = self.constraint
        if kind == "arrive_before":
            return flight["arrive"] < value
        if kind == "depart_after":
            return flight["depart"] >= value
        return flight["stops"] <= value

    def _tie(self, day: list[dict]) -> bool:
        """A flight exactly on the time limit would make 'before' ambiguous, so such days are redrawn."""
        kind, value = self.constraint
        return kind != "max_stops" and any(value in (f["depart"], f["arrive"]) for f in day)

    def _add_flights(self, date: datetime.date, count: int) -> list[dict]:
        rng, made = self.rng, []
        fares = rng.sample(range(89, 520), count)  # distinct, so the cheapest valid flight is unique
        for fare in fares:
            fid = ""
            while not fid or fid in self.flights:
                fid = rng.choice(sorted(AIRLINES)) + str(rng.randint(100, 999))
            stops = rng.choice([0, 0, 1, 1, 2])
            depart = rng.randrange(6 * 60, 17 * 60 + 1, 5)
            arrive = depart + self.block + stops * rng.randrange(50, 125, 5)
            seats = {s: rng.randint(0, 6) for s in SEATS}
            flight = {"id": fid, "date": date.isoformat(), "depart": depart, "arrive": arrive, "stops": stops}
            flight |= {"fare": fare, "seats": seats}
            self.flights[fid] = flight
            made.append(flight)
        return made

    def _booked_correctly(self) -> bool:
        """Exactly one booking, on the right flight, for the right passenger, in the right seat type."""
        want = (self.target["id"], self.traveler_id, self.seat)
        return len(self.bookings) == 1 and tuple(self.bookings[0][k] for k in ("flight", "passenger", "seat")) == want

    def _airport(self, text: str) -> str:
        key = text.strip().upper()
        for code, city in CITIES.items():
            if key in (code, city.upper()):
                return code
        raise ToolError(
            f"unknown city or airport {text!a}. Known: {', '.join(f'{c} ({n})' for c, n in CITIES.items())}"
        )

    # -- tools --------------------------------------------------------------------------------------------------------
    def tool_find_passenger(self, query: str) -> str:
        """Look up passenger profiles whose name contains the given text.

        Args:
            query: Full or partial passenger name, case-insensitive.
        """
        text = " ".join(query.lower().split())
        found = [{"passenger_id": p, "name": n} for p, n in self.passengers.items() if text and text in n.lower()]
        if not found:
            raise ToolError(f"no passenger matches {query!a}")
        return json.dumps(found)

    def tool_search_flights(self, origin: str, destination: str, date: str) -> str:
        """List the flights between two cities on one day, with times, stops and fares.

        Args:
            origin: Departure city name or airport code, e.g. "Boston" or "BOS".
            destination: Arrival city name or airport code.
            date: Travel date as YYYY-MM-DD.
        """
        src, dst = self._airport(origin), self._airport(destination)
        try:
            day = datetime.date.fromisoformat(date.strip()).isoformat()
        except ValueError:
            raise ToolError(f"date must be YYYY-MM-DD, got {date!a}") from None
        if (src, dst) != (self.origin, self.dest) or day not in {f["date"] for f in self.flights.values()}:
            return f"No flights found from {src} to {dst} on {day}."
        rows = sorted((f for f in self.flights.values() if f["date"] == day), key=lambda f: f["depart"])
        lines = [f"{len(rows)} flights {src} -> {dst} on {day}:"]
        for f in rows:
            row = {"flight_id": f["id"], "depart": _hm(f["depart"]), "arrive": _hm(f["arrive"]), "stops": f["stops"]}
            lines.append(json.dumps(row | {"fare_usd": f["fare"]}))
        return "\n".join(lines)

    def tool_hold_seat(self, flight_id: str, seat_type: Literal["window", "aisle", "middle"]) -> str:
        """Hold one seat of the given type on a flight; returns a hold id to book with.

        Args:
            flight_id: Flight id from search_flights, e.g. "NA412".
            seat_type: Which kind of seat to hold.
        """
        flight = self.flights.get(flight_id.strip().upper())
        if flight is None:
            raise ToolError(f"unknown flight {flight_id!a}")
        if flight["seats"][seat_type] <= 0:
            raise ToolError(f"no {seat_type} seats left on {flight['id']}")
        flight["seats"][seat_type] -= 1
        hold_id = f"HD-{self.hold_base + len(self.holds)}"
        seat = f"{10 + len(self.holds) + flight['fare'] % 17}{SEAT_LETTER[seat_type]}"
        self.holds[hold_id] = {"flight": flight["id"], "seat": seat_type, "used": False}
        return f"Hold {hold_id}: {seat_type} seat {seat} on {flight['id']} ({flight['date']}), valid for 15 minutes."

    def tool_book(self, hold_id: str, passenger_id: str) -> str:
        """Turn a seat hold into a paid booking for a passenger; returns the confirmation code.

        Args:
            hold_id: Hold id from hold_seat, e.g. "HD-4821".
            passenger_id: Passenger id from find_passenger, e.g. "P-1234".
        """
        hold = self.holds.get(hold_id.strip().upper())
        if hold is None:
            raise ToolError(f"unknown hold {hold_id!a}")
        if hold["used"]:
            raise ToolError(f"hold {hold_id} was already booked")
        pid = passenger_id.strip().upper()
        if pid not in self.passengers:
            raise ToolError(f"unknown passenger {passenger_id!a}")
        if len(self.bookings) >= len(self.codes):
            raise ToolError("booking limit reached for this session")
        hold["used"] = True
        code = self.codes[len(self.bookings)]
        self.bookings.append({"code": code, "flight": hold["flight"], "passenger": pid, "seat": hold["seat"]})
        return f"Booked {self.passengers[pid]} on {hold['flight']} ({hold['seat']} seat). Confirmation code: {code}"

    def tool_get_baggage_policy(self, airline: str) -> str:
        """Show the checked-baggage allowance of an airline.

        Args:
            airline: Airline name or two-letter code, e.g. "NA".
        """
        key = airline.strip().upper()
        for code, name in AIRLINES.items():
            if key in (code, name.upper()):
                return f"{name}: 1 carry-on free; first checked bag ${25 + 5 * (len(name) % 4)}, max 23 kg."
        raise ToolError(f"unknown airline {airline!a}. Known: {', '.join(AIRLINES)}")

    def tool_get_loyalty_balance(self, passenger_id: str) -> str:
        """Show a passenger's frequent-flyer points balance.

        Args:
            passenger_id: Passenger id from find_passenger.
        """
        pid = passenger_id.strip().upper()
        if pid not in self.passengers:
            raise ToolError(f"unknown passenger {passenger_id!a}")
        return json.dumps({"passenger_id": pid, "points": int(pid[2:]) * 7 % 50000})

    def solution(self) -> list[str]:
        hold_id = f"HD-{self.hold_base + len(self.holds)}"  # the id the next hold_seat call will return
        route = {"origin": self.origin, "destination": self.dest, "date": self.date.isoformat()}
        return [
            tool_call("find_passenger", query=self.traveler) + "\n" + tool_call("search_flights", **route),
            tool_call("hold_seat", flight_id=self.target["id"], seat_type=self.seat),
            tool_call("book", hold_id=hold_id, passenger_id=self.traveler_id),
            f"<answer>{self.codes[len(self.bookings)]}</answer>",
        ]
