import type { Lang, WidgetErrorCode } from "./types.ts";

export interface Texts {
  label: string;
  connecting: string;
  inCall: string;
  retry: string;
  announceConnecting: string;
  announceInCall: string;
  errors: Record<WidgetErrorCode, string>;
}

/** Every visible or announced text, in both languages. No technical code ever reaches the visitor. */
export const TEXTS: Record<Lang, Texts> = {
  en: {
    label: "Talk to the agent",
    connecting: "Connecting…",
    inCall: "End the call",
    retry: "Try again",
    announceConnecting: "Connecting to the agent. Allow the microphone if your browser asks.",
    announceInCall: "Call in progress. Your microphone is on.",
    errors: {
      microphone_blocked: "The microphone is blocked. Allow it in your browser settings, then try again.",
      microphone_unavailable: "No microphone is available. Connect one, then try again.",
      network_error: "Network failure. Check your connection, then try again.",
      media_error: "The call connection failed. Please try again.",
      origin_not_allowed: "Calls are not allowed from this website.",
      invalid_key: "This call button is not set up correctly.",
      invalid_captcha: "The security check failed. Reload the page, then try again.",
      rate_limited: "Too many attempts. Please wait a few minutes, then try again.",
      minute_cap_reached: "No call time is left this month.",
      plan_minutes_exhausted: "No call time is left this month.",
      plan_required: "Calls are not available at the moment.",
      agent_unavailable: "The agent is not available right now. Please try again later.",
      invalid_session_token: "This call session has expired. Reload the page, then try again.",
      call_start_failed: "The call could not be started. Please try again.",
      unknown: "Something went wrong. Please try again.",
    },
  },
  fr: {
    label: "Parler à l'agent",
    connecting: "Connexion…",
    inCall: "Raccrocher",
    retry: "Réessayer",
    announceConnecting: "Connexion à l'agent. Autorisez le micro si votre navigateur le demande.",
    announceInCall: "Appel en cours. Votre micro est activé.",
    errors: {
      microphone_blocked:
        "Le micro est bloqué. Autorisez-le dans les réglages de votre navigateur, puis réessayez.",
      microphone_unavailable: "Aucun micro n'est disponible. Branchez-en un, puis réessayez.",
      network_error: "Problème de réseau. Vérifiez votre connexion, puis réessayez.",
      media_error: "La connexion de l'appel a échoué. Veuillez réessayer.",
      origin_not_allowed: "Les appels ne sont pas autorisés depuis ce site.",
      invalid_key: "Ce bouton d'appel n'est pas configuré correctement.",
      invalid_captcha: "La vérification de sécurité a échoué. Rechargez la page, puis réessayez.",
      rate_limited: "Trop de tentatives. Patientez quelques minutes, puis réessayez.",
      minute_cap_reached: "Il ne reste plus de temps d'appel ce mois-ci.",
      plan_minutes_exhausted: "Il ne reste plus de temps d'appel ce mois-ci.",
      plan_required: "Les appels ne sont pas disponibles pour le moment.",
      agent_unavailable: "L'agent n'est pas disponible pour le moment. Réessayez plus tard.",
      invalid_session_token: "La session d'appel a expiré. Rechargez la page, puis réessayez.",
      call_start_failed: "L'appel n'a pas pu démarrer. Veuillez réessayer.",
      unknown: "Un problème est survenu. Veuillez réessayer.",
    },
  },
};

/** `fr`, `fr-FR`, `FR-ca` → fr; anything else → en. */
export function resolveLang(value: string | null | undefined): Lang {
  return value?.trim().toLowerCase().split(/[-_]/)[0] === "fr" ? "fr" : "en";
}
