/**
 * When a simulated call moves, in seconds after its creation, before SIMULATION_TIME_SCALE: `ringing`
 * at +2 s, `ongoing` at +5 s, then `completed` its drawn duration (30–89 s) after `ongoing`.
 */
export const SIMULATED_SCHEDULE = { ringingAfter: 2, ongoingAfter: 5 } as const;
