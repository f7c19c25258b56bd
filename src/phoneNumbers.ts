import { parsePhoneNumberFromString } from "libphonenumber-js";

/**
 * Countries of phone numbers, from libphonenumber's metadata (the numbering plans it keeps up to
 * date), never from a table of prefixes of our own: +1 alone is shared by some twenty countries.
 */

/**
 * The officially assigned ISO 3166-1 alpha-2 codes (249). Not the phone library's region list, which
 * numbers some territories apart (AC Ascension, TA Tristan da Cunha, XK Kosovo: not ISO codes) and
 * leaves out those without a numbering plan of their own (AQ, BV, GS, HM, PN, TF, UM: ISO codes). A
 * code the library does not number is still a country an organization may list; no number belongs to
 * it. The list changes a few times a decade: keep it in step with ISO's.
 */
const ISO_3166_ALPHA_2: ReadonlySet<string> = new Set(
  (
    "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY " +
    "BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK " +
    "FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR " +
    "IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK " +
    "ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM " +
    "PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF " +
    "TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW"
  ).split(" "),
);

/** Whether `code` (upper case) is an ISO 3166-1 alpha-2 country code. */
export function isCountryCode(code: string): boolean {
  return ISO_3166_ALPHA_2.has(code);
}

/**
 * The country of an E.164 number, or null when it belongs to none (non-geographic numbers such as
 * +800, or a number of a shared calling code that matches no country's plan).
 */
export function countryOf(e164: string): string | null {
  return parsePhoneNumberFromString(e164)?.country ?? null;
}

/**
 * The one spelling of a number, so that a do-not-call entry, a call's `to` and a filter compare
 * equal however the number was written: +33 0612345678 (the national prefix kept after the country
 * code) is +33612345678. Only where the library reads a number its country's plan makes possible;
 * anything else is kept as written (a fictitious test number stays what the integrator sent). The
 * library drops one prefix at a time (+49 00 30…): repeated until nothing changes, so that the one
 * spelling of a spelling is itself.
 */
export function canonicalNumber(e164: string): string {
  let number = e164;
  for (let i = 0; i < 8; i++) {
    const parsed = parsePhoneNumberFromString(number);
    if (!parsed?.isPossible() || parsed.number === number) return number;
    number = parsed.number;
  }
  return number;
}

/** Whether an E.164 number starts with a country calling code that exists (+999 is none). */
export function hasCallingCode(e164: string): boolean {
  return parsePhoneNumberFromString(e164) !== undefined;
}
