import { type Random, seededRandom } from "./random.ts";

/**
 * The fiction of a simulated call: a short appointment-booking conversation, its summary and the data
 * collected (`appointment_date`, `reason`). Seeded by the call id, so any process that completes the
 * call writes the same content, and calls differ from one another. French or English.
 */

export type Language = "en" | "fr";

export interface TranscriptSegment {
  speaker: "agent" | "contact";
  text: string;
  offsetSeconds: number;
}

export interface SimulatedOutcome {
  segments: TranscriptSegment[];
  summary: string;
  collectedData: { appointment_date: string; reason: string };
}

/** Simulated call durations: 30 to 89 seconds. */
export function drawDurationSeconds(seed: string): number {
  return seededRandom(`${seed}:duration`).int(30, 89);
}

/** `fr…` or `en…` in the `language` variable wins; otherwise the agent's language. */
export function pickLanguage(
  variables: Record<string, unknown> | null | undefined,
  agentLanguage: string,
): Language {
  return languageOfVariables(variables) ?? (agentLanguage === "fr" ? "fr" : "en");
}

/**
 * The language the `language` variable asks for (`fr…`, `français`, `en…`), or null when it asks for
 * none and the agent's language applies. A session token keeps this from its mint, so that the call it
 * starts later is created in one statement with the agent's language as the fallback.
 */
export function languageOfVariables(variables: Record<string, unknown> | null | undefined): Language | null {
  const v = variables?.language;
  if (typeof v === "string") {
    const l = v.trim().toLowerCase();
    if (l.startsWith("fr") || l === "français" || l === "francais") return "fr";
    if (l.startsWith("en")) return "en";
  }
  return null;
}

interface Business {
  en: { place: string; reasons: string[] };
  /** `of`: the place with its French preposition ("du garage", "de la clinique"). */
  fr: { place: string; of: string; reasons: string[] };
}

const BUSINESSES: Business[] = [
  {
    en: {
      place: "the dental practice",
      reasons: ["a check-up and cleaning", "a toothache", "a broken filling", "a whitening consultation"],
    },
    fr: {
      place: "le cabinet dentaire",
      of: "du cabinet dentaire",
      reasons: ["un détartrage", "une rage de dents", "un plombage cassé", "une consultation de blanchiment"],
    },
  },
  {
    en: {
      place: "the garage",
      reasons: [
        "a yearly service",
        "a brake inspection",
        "a tyre change",
        "a warning light on the dashboard",
      ],
    },
    fr: {
      place: "le garage",
      of: "du garage",
      reasons: [
        "la révision annuelle",
        "un contrôle des freins",
        "un changement de pneus",
        "un voyant allumé",
      ],
    },
  },
  {
    en: {
      place: "the physiotherapy clinic",
      reasons: ["lower back pain", "a knee rehabilitation session", "a sprained ankle", "shoulder stiffness"],
    },
    fr: {
      place: "le cabinet de kinésithérapie",
      of: "du cabinet de kinésithérapie",
      reasons: [
        "un mal de dos",
        "une rééducation du genou",
        "une entorse de la cheville",
        "une épaule bloquée",
      ],
    },
  },
  {
    en: {
      place: "the veterinary clinic",
      reasons: [
        "a vaccination for the dog",
        "a cat that stopped eating",
        "a yearly check-up",
        "a limping puppy",
      ],
    },
    fr: {
      place: "la clinique vétérinaire",
      of: "de la clinique vétérinaire",
      reasons: [
        "un vaccin pour le chien",
        "un chat qui ne mange plus",
        "un bilan annuel",
        "un chiot qui boite",
      ],
    },
  },
  {
    en: {
      place: "the hair salon",
      reasons: ["a haircut", "a colour and cut", "a wedding hairstyle trial", "a beard trim"],
    },
    fr: {
      place: "le salon de coiffure",
      of: "du salon de coiffure",
      reasons: [
        "une coupe",
        "une couleur et une coupe",
        "un essai de coiffure de mariage",
        "une taille de barbe",
      ],
    },
  },
];

const NAMES = [
  "Claire",
  "Thomas",
  "Amina",
  "Lucas",
  "Sofia",
  "Hugo",
  "Nadia",
  "Julien",
  "Emma",
  "Karim",
  "Léa",
  "Paul",
];
const TIMES = ["9:00", "9:30", "10:15", "11:00", "14:00", "14:45", "16:30", "17:15"];

const WEEKDAYS = {
  en: ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"],
  fr: ["dimanche", "lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi"],
};
const MONTHS = {
  en: [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
  ],
  fr: [
    "janvier",
    "février",
    "mars",
    "avril",
    "mai",
    "juin",
    "juillet",
    "août",
    "septembre",
    "octobre",
    "novembre",
    "décembre",
  ],
};

/** A weekday 2 to 20 days after the call. */
function appointmentDate(r: Random, from: Date): Date {
  const d = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate() + r.int(2, 20)));
  const day = d.getUTCDay();
  if (day === 0) d.setUTCDate(d.getUTCDate() + 1);
  if (day === 6) d.setUTCDate(d.getUTCDate() + 2);
  return d;
}

function spokenDate(d: Date, lang: Language): string {
  const wd = WEEKDAYS[lang][d.getUTCDay()]!;
  const m = MONTHS[lang][d.getUTCMonth()]!;
  return lang === "fr" ? `${wd} ${d.getUTCDate()} ${m}` : `${wd}, ${m} ${d.getUTCDate()}`;
}

function contactName(r: Random, variables: Record<string, unknown> | null | undefined): string {
  for (const key of ["firstName", "first_name", "name", "prenom", "prénom"]) {
    const v = variables?.[key];
    if (typeof v === "string" && v.trim() && v.length <= 40) return v.trim();
  }
  return r.pick(NAMES);
}

function lines(
  lang: Language,
  r: Random,
  ctx: { name: string; place: string; of: string; reason: string; date: string; time: string },
): [TranscriptSegment["speaker"], string][] {
  const { name, place, of, reason, date, time } = ctx;
  if (lang === "fr") {
    return [
      [
        "agent",
        r.pick([
          `Bonjour ${name}, ici l'assistant ${of}.`,
          `Bonjour, c'est ${place}, je parle bien à ${name} ?`,
        ]),
      ],
      ["contact", r.pick(["Oui, bonjour.", "Oui, c'est moi, bonjour.", "Bonjour, oui."])],
      [
        "agent",
        r.pick([
          "Je vous appelle pour fixer votre rendez-vous. Quel en est le motif ?",
          "Vous souhaitiez prendre rendez-vous, pour quel motif ?",
        ]),
      ],
      ["contact", r.pick([`C'est pour ${reason}.`, `Alors, pour ${reason}, s'il vous plaît.`])],
      [
        "agent",
        r.pick([
          `Très bien. Je peux vous proposer ${date} à ${time.replace(":", " h ")}.`,
          `Entendu. ${date} à ${time.replace(":", " h ")}, cela vous irait ?`,
        ]),
      ],
      ["contact", r.pick(["Parfait, ça me va.", "Oui, c'est très bien.", "D'accord, je note."])],
      [
        "agent",
        r.pick([
          "C'est noté. Vous recevrez un rappel la veille.",
          "Votre rendez-vous est confirmé, un SMS de rappel vous sera envoyé.",
        ]),
      ],
      ["contact", r.pick(["Merci beaucoup, au revoir.", "Merci, bonne journée.", "Super, merci !"])],
      ["agent", r.pick(["Merci à vous, bonne journée.", "Au revoir et à bientôt."])],
    ];
  }
  return [
    [
      "agent",
      r.pick([
        `Hello ${name}, this is the assistant of ${place}.`,
        `Hi, ${place} calling, am I speaking with ${name}?`,
      ]),
    ],
    ["contact", r.pick(["Yes, hello.", "Yes, speaking.", "Hi, yes."])],
    [
      "agent",
      r.pick([
        "I'm calling to book your appointment. What is it for?",
        "You wanted to book an appointment. What's the reason for the visit?",
      ]),
    ],
    ["contact", r.pick([`It's for ${reason}.`, `Well, ${reason}, please.`])],
    [
      "agent",
      r.pick([`Great. I can offer you ${date} at ${time}.`, `Sure. Would ${date} at ${time} work for you?`]),
    ],
    ["contact", r.pick(["Perfect, that works.", "Yes, that's fine.", "Okay, I'll write it down."])],
    [
      "agent",
      r.pick([
        "You're booked. You'll get a reminder the day before.",
        "Your appointment is confirmed; a text reminder will follow.",
      ]),
    ],
    ["contact", r.pick(["Thank you, goodbye.", "Thanks, have a nice day.", "Great, thanks!"])],
    ["agent", r.pick(["Thank you, have a good day.", "Goodbye, see you soon."])],
  ];
}

/** The transcript, summary and collected data of a simulated call of `durationSeconds`. */
export function simulateOutcome(input: {
  seed: string;
  language: Language;
  durationSeconds: number;
  /** When the call took place; the appointment is set a few days later. */
  at: Date;
  variables?: Record<string, unknown> | null;
}): SimulatedOutcome {
  const r = seededRandom(`${input.seed}:content`);
  const lang = input.language;
  const picked = r.pick(BUSINESSES);
  const business = lang === "fr" ? picked.fr : { ...picked.en, of: `of ${picked.en.place}` };
  const reason = r.pick(business.reasons);
  const date = appointmentDate(r, input.at);
  const time = r.pick(TIMES);
  const name = contactName(r, input.variables);
  const script = lines(lang, r, {
    name,
    place: business.place,
    of: business.of,
    reason,
    date: spokenDate(date, lang),
    time,
  });
  // Offsets spread over the call, strictly increasing, the last one a few seconds before the end.
  const span = Math.max(script.length, input.durationSeconds - 3);
  let offset = 0;
  const segments = script.map(([speaker, text], i) => {
    const seg: TranscriptSegment = { speaker, text, offsetSeconds: offset };
    const remaining = script.length - 1 - i;
    const share = remaining > 0 ? Math.floor((span - offset) / (remaining + 1)) : 0;
    offset = Math.min(span, offset + Math.max(1, share + r.int(-1, 1)));
    return seg;
  });
  const iso = date.toISOString().slice(0, 10);
  const summary =
    lang === "fr"
      ? `${name} a pris rendez-vous auprès ${business.of} pour ${reason}, le ${spokenDate(date, lang)} à ${time.replace(":", " h ")}.`
      : `${name} booked an appointment with ${business.place} for ${reason} on ${spokenDate(date, lang)} at ${time}.`;
  return { segments, summary, collectedData: { appointment_date: iso, reason } };
}
