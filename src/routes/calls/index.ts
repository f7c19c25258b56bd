import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateCall } from "./create.ts";
import { registerGetCall } from "./get.ts";
import { registerListCalls } from "./list.ts";
import { registerGetRecording } from "./recording.ts";
import { registerReportCallResults } from "./results.ts";
import { registerGetTranscript } from "./transcript.ts";

export const callRoutes: RouteRegistration[] = [
  registerCreateCall,
  registerListCalls,
  registerGetCall,
  registerGetTranscript,
  registerReportCallResults,
  registerGetRecording,
];
