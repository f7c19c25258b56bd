import { getCountries, parsePhoneNumberFromString } from "libphonenumber-js";

/**
 * Countries of phone numbers, from libphonenumber's metadata (the numbering plans it keeps up to
 * date), never from a table of prefixes of our own: +1 alone is shared by some twenty countries.
 */

/** The region codes the library knows: ISO 3166-1 alpha-2, plus a few regions it numbers apart (XK, AC, TA). */
const REGIONS: ReadonlySet<string> = new Set(getCountries());

/** Whether `code` (upper case) is a country the phone library knows. */
export function isKnownCountry(code: string): boolean {
  return REGIONS.has(code);
}

/**
 * The country of an E.164 number, or null when it belongs to none (non-geographic numbers such as
 * +800, or a number of a shared calling code that matches no country's plan).
 */
export function countryOf(e164: string): string | null {
  return parsePhoneNumberFromString(e164)?.country ?? null;
}
