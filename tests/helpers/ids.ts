import { type Clock, systemClock } from "../../src/clock.ts";
import { IdGenerator } from "../../src/ids.ts";

const generators = new Map<Clock, IdGenerator>();

/** An id as the service would make it with `clock` (one sequence per clock, as in the service). */
export function newId(prefix: Parameters<IdGenerator["next"]>[0], clock: Clock = systemClock): string {
  let ids = generators.get(clock);
  if (!ids) {
    ids = new IdGenerator(clock);
    generators.set(clock, ids);
  }
  return ids.next(prefix);
}
