"""HiBob: the HR system and the source of truth for who works here."""

from __future__ import annotations

from datetime import date, timedelta

from runner.world.org import ACQUISITION_DATE, AS_OF, DOMAIN, OLD_DOMAIN, Org, Person, Rows, day
from runner.world.tables.hibob import HibobPersonRow

FIRST = [
    "James",
    "Mary",
    "Robert",
    "Patricia",
    "John",
    "Jennifer",
    "Michael",
    "Linda",
    "David",
    "Elizabeth",
    "William",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
    "Christopher",
    "Lisa",
    "Daniel",
    "Nancy",
    "Matthew",
    "Betty",
    "Anthony",
    "Sandra",
    "Mark",
    "Margaret",
    "Donald",
    "Ashley",
    "Steven",
    "Kimberly",
    "Andrew",
    "Emily",
    "Paul",
    "Donna",
    "Joshua",
    "Michelle",
    "Kenneth",
    "Carol",
    "Kevin",
    "Amanda",
    "Brian",
    "Melissa",
    "George",
    "Deborah",
    "Timothy",
    "Stephanie",
    "Ronald",
    "Rebecca",
    "Jason",
    "Laura",
    "Edward",
    "Helen",
    "Jeffrey",
    "Sharon",
    "Ryan",
    "Cynthia",
    "Jacob",
    "Kathleen",
    "Gary",
    "Amy",
    "Nicholas",
    "Angela",
    "Eric",
    "Shirley",
    "Jonathan",
    "Anna",
    "Stephen",
    "Ruth",
    "Larry",
    "Brenda",
    "Justin",
    "Pamela",
    "Scott",
    "Nicole",
    "Brandon",
    "Katherine",
    "Benjamin",
    "Samantha",
    "Samuel",
    "Christine",
    "Gregory",
    "Emma",
    "Alexander",
    "Catherine",
    "Patrick",
    "Debra",
    "Frank",
    "Rachel",
    "Raymond",
    "Carolyn",
    "Jack",
    "Janet",
    "Dennis",
    "Maria",
    "Jerry",
    "Heather",
    "Tyler",
    "Diane",
    "Aaron",
    "Julie",
    "Priya",
    "Rahul",
    "Wei",
    "Mei",
    "Hiroshi",
    "Yuki",
    "Ahmed",
    "Fatima",
    "Carlos",
    "Sofia",
    "Lukas",
    "Hannah",
    "Oliver",
    "Amelia",
    "Noah",
    "Ava",
    "Liam",
    "Chloe",
    "Arjun",
    "Ananya",
    "Diego",
    "Lucia",
    "Mateo",
    "Ines",
    "Felix",
    "Greta",
    "Omar",
    "Leila",
    "Chen",
    "Jun",
    "Min-jun",
    "Seo-yeon",
    "Ivan",
    "Olga",
    "Tomasz",
    "Zofia",
    "Kwame",
    "Amara",
    "Alex",
    "Sam",
    "Jordan",
    "Taylor",
    "Morgan",
    "Casey",
]
LAST = [
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Harris",
    "Sanchez",
    "Clark",
    "Ramirez",
    "Lewis",
    "Robinson",
    "Walker",
    "Young",
    "Allen",
    "King",
    "Wright",
    "Scott",
    "Torres",
    "Nguyen",
    "Hill",
    "Flores",
    "Green",
    "Adams",
    "Nelson",
    "Baker",
    "Hall",
    "Rivera",
    "Campbell",
    "Mitchell",
    "Carter",
    "Roberts",
    "Patel",
    "Shah",
    "Kumar",
    "Singh",
    "Gupta",
    "Chen",
    "Wang",
    "Li",
    "Zhang",
    "Liu",
    "Kim",
    "Park",
    "Choi",
    "Tanaka",
    "Sato",
    "Suzuki",
    "Mueller",
    "Schmidt",
    "Schneider",
    "Fischer",
    "Weber",
    "Meyer",
    "Wagner",
    "Becker",
    "Novak",
    "Kowalski",
    "Nowak",
    "Ivanov",
    "Petrov",
    "Okafor",
    "Mensah",
    "Boateng",
    "Haddad",
    "Khalil",
    "Rossi",
    "Russo",
    "Ferrari",
    "Esposito",
    "Bianchi",
    "Dubois",
    "Laurent",
    "Bernard",
    "Moreau",
    "Silva",
    "Santos",
    "Oliveira",
    "Costa",
    "Pereira",
    "Murphy",
    "Kelly",
    "OBrien",
    "Walsh",
    "Byrne",
    "Ryan",
    "Larsen",
    "Hansen",
    "Nielsen",
    "Berg",
    "Lindqvist",
    "Eriksson",
    "Johansson",
    "Jensen",
    "Andersen",
    "Fernandes",
    "Reyes",
    "Cruz",
    "Ortiz",
    "Morales",
    "Gomez",
    "Diaz",
    "Vargas",
    "Castillo",
    "Romero",
    "Alvarez",
    "Ruiz",
    "Jimenez",
    "Moreno",
]

# department -> (share of headcount, titles from junior to senior, access tags)
DEPARTMENTS: dict[str, tuple[int, tuple[str, ...], set[str]]] = {
    "Engineering": (
        34,
        (
            "Software Engineer",
            "Senior Software Engineer",
            "Staff Engineer",
            "Engineering Manager",
            "Director of Engineering",
        ),
        {"eng"},
    ),
    "Platform": (
        6,
        ("Site Reliability Engineer", "Senior SRE", "Platform Engineer", "Platform Lead"),
        {"eng", "sre"},
    ),
    "Data": (
        7,
        ("Data Analyst", "Data Engineer", "Senior Data Engineer", "Data Science Manager"),
        {"eng", "data"},
    ),
    "Security": (
        3,
        ("Security Engineer", "Senior Security Engineer", "Security Operations Lead", "Head of Security"),
        {"eng", "sec"},
    ),
    "IT": (3, ("IT Support Specialist", "Systems Administrator", "Identity Engineer", "IT Manager"), {"it"}),
    "Product": (
        6,
        ("Product Designer", "Product Manager", "Senior Product Manager", "Director of Product"),
        set(),
    ),
    "Sales": (
        15,
        ("Sales Development Rep", "Account Executive", "Senior Account Executive", "Regional Sales Director"),
        set(),
    ),
    "Marketing": (
        6,
        ("Marketing Specialist", "Content Strategist", "Marketing Manager", "VP Marketing"),
        set(),
    ),
    "Customer Success": (
        9,
        ("Support Engineer", "Customer Success Manager", "Solutions Architect", "Head of Customer Success"),
        set(),
    ),
    "Finance": (4, ("Accountant", "Financial Analyst", "Controller", "CFO"), {"finance"}),
    "People": (3, ("People Partner", "Recruiter", "HR Operations Lead", "VP People"), set()),
    "Legal": (2, ("Paralegal", "Counsel", "General Counsel"), set()),
    "Operations": (2, ("Operations Analyst", "Business Operations Manager", "COO"), set()),
}
SITES = ("San Francisco", "New York", "London", "Berlin", "Toronto", "Bangalore", "Remote - US")
ENTITY_FOR_SITE = {"London": "Corvid Systems Ltd.", "Berlin": "Corvid Systems GmbH"}
TOTAL_PEOPLE = 1640
LUMEN_STAFF = 150


def generate(org: Org) -> Rows:
    """Draw the people, then write them as HiBob rows."""
    rng = org.rng
    used_handles: set[str] = set()
    used_emails: set[str] = set()
    used_old: set[str] = set()
    dept_names = list(DEPARTMENTS)
    weights = [DEPARTMENTS[d][0] for d in dept_names]
    for i in range(TOTAL_PEOPLE):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        # Two people share a name on purpose: identity resolution by name alone is ambiguous.
        if i == 901:
            first, last = org.people[400].first, org.people[400].last
        dept = rng.choices(dept_names, weights)[0]
        titles = DEPARTMENTS[dept][1]
        title = titles[min(int(rng.random() ** 2 * len(titles)), len(titles) - 1)]
        base = f"{first}.{last}".lower().replace("-", "").replace(" ", "")
        email, n = f"{base}@{DOMAIN}", 2
        while email in used_emails:
            email, n = f"{base}{n}@{DOMAIN}", n + 1
        used_emails.add(email)
        hbase = (first[0] + last).lower().replace("-", "")
        handle, n = hbase, 2
        while handle in used_handles:
            handle, n = f"{hbase}{n}", n + 1
        used_handles.add(handle)
        site = rng.choice(SITES)
        acquired = i >= TOTAL_PEOPLE - LUMEN_STAFF
        start = ACQUISITION_DATE if acquired else date(2016, 1, 4) + timedelta(days=rng.randint(0, 3800))
        emp_type = "Permanent"
        roll = rng.random()
        if roll < 0.08:
            emp_type = "Contractor"
        elif roll < 0.10:
            emp_type = "Intern"
        person = Person(
            pid=str(3_100_000 + i * 7 + rng.randint(0, 6)),
            first=first,
            last=last,
            email=email,
            handle=handle,
            department=dept,
            title=title,
            site=site,
            employment_type=emp_type,
            status="active",
            start=start,
            legal_entity="Lumen Analytics Ltd." if acquired else ENTITY_FOR_SITE.get(site, "Corvid Systems Inc."),
            old_email=_unique(f"{first[0].lower()}{last.lower()}", OLD_DOMAIN, used_old) if acquired else None,
            tags=set(DEPARTMENTS[dept][2]),
        )
        if emp_type != "Permanent":
            person.contract_end = start + timedelta(days=rng.choice((180, 270, 365, 540, 730)))
            if person.contract_end < AS_OF.date() and rng.random() < 0.45:
                # Renewed: most long-running contractors have a current contract.
                person.contract_end = AS_OF.date() + timedelta(days=rng.randint(20, 400))
        org.people.append(person)
    _assign_lifecycle(org)
    _assign_managers(org)
    rows = [
        HibobPersonRow(
            p.pid,
            p.name,
            p.first,
            p.last,
            p.email,
            f"{p.first.lower()}{rng.randint(10, 99)}@{rng.choice(('gmail.com', 'outlook.com', 'proton.me'))}"
            if rng.random() < 0.35
            else None,
            p.department,
            p.title,
            p.site,
            p.manager_pid,
            p.employment_type,
            p.legal_entity,
            p.status,
            day(p.start),
            day(p.termination) if p.termination else None,
            day(p.contract_end) if p.contract_end else None,
        )
        for p in org.people
    ]
    return {"hibob_people": rows}


def _unique(local: str, domain: str, taken: set[str]) -> str:
    """``local@domain``, with a counter appended when the address is taken (as every IdP forces)."""
    address, n = f"{local}@{domain}", 2
    while address in taken:
        address, n = f"{local}{n}@{domain}", n + 1
    taken.add(address)
    return address


def _assign_lifecycle(org: Org) -> None:
    """Leavers over the years, people on leave, and contracts that lapsed without anyone noticing."""
    rng = org.rng
    as_of = AS_OF.date()
    for p in org.people:
        tenure_days = (as_of - p.start).days
        if tenure_days < 60:
            continue
        if p.contract_end and p.contract_end < as_of:
            # Most lapsed contracts are closed properly in HR; a few are not (planted below).
            p.status = "terminated"
            p.termination = p.contract_end
            continue
        if rng.random() < 0.15:
            p.status = "terminated"
            p.termination = p.start + timedelta(days=rng.randint(45, tenure_days - 1))
        elif rng.random() < 0.02:
            p.status = "leave"
    # Contractors whose contract ended but who are still `active` in HR (planted family 2).
    lapsed = [
        p
        for p in org.people
        if p.employment_type == "Contractor"
        and p.status == "terminated"
        and p.termination
        and p.termination > as_of - timedelta(days=400)
    ]
    for p in lapsed[-14:]:
        if p.contract_end is None or p.contract_end >= as_of:
            # Terminated early for another reason: the lapse is the contract end HR recorded.
            p.contract_end = p.termination
        p.status = "active"
        p.termination = None
        p.tags.add("lapsed_contract")
    # A wave of recent leavers gives the offboarding families enough people to plant on.
    recent = [
        p
        for p in org.people
        if p.status == "active"
        and p.employment_type == "Permanent"
        and (as_of - p.start).days > 400
        and "lapsed_contract" not in p.tags
    ]
    for p in rng.sample(recent, 70):
        p.status = "terminated"
        p.termination = as_of - timedelta(days=rng.randint(8, 330))


def _assign_managers(org: Org) -> None:
    """A plausible reporting tree: CEO, department heads, managers, individual contributors."""
    rng = org.rng
    ceo = org.people[0]
    ceo.title, ceo.department, ceo.status, ceo.termination = (
        "Chief Executive Officer",
        "Operations",
        "active",
        None,
    )
    ceo.employment_type, ceo.contract_end, ceo.start = "Permanent", None, date(2015, 6, 1)
    ceo.tags.discard("lapsed_contract")
    for dept in DEPARTMENTS:
        staff = [p for p in org.people[1:] if p.department == dept]
        current = [p for p in staff if p.status != "terminated" and p.employment_type == "Permanent"]
        if not current:
            continue
        head = current[0]
        head.manager_pid = ceo.pid
        leads = current[1 : 1 + max(1, len(current) // 9)]
        for lead in leads:
            lead.manager_pid = head.pid
        for p in staff:
            if p is head or p in leads:
                continue
            p.manager_pid = rng.choice(leads).pid
