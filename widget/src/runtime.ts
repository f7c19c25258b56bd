import { captchaToken, loadCaptcha, releaseCaptcha } from "./captcha.ts";
import type { Runtime } from "./controller.tsx";
import type { MediaClient } from "./types.ts";

const mediaLoads = new Map<string, Promise<MediaClient>>();

/** Imports the media client once per address; a failed load may be retried. */
function loadMedia(url: string): Promise<MediaClient> {
  let loading = mediaLoads.get(url);
  if (!loading) {
    loading = import(/* @vite-ignore */ url) as Promise<MediaClient>;
    loading.catch(() => mediaLoads.delete(url));
    mediaLoads.set(url, loading);
  }
  return loading;
}

/** The real browser behind the widget. */
export function browserRuntime(win: Window): Runtime {
  const devices = win.navigator.mediaDevices;
  return {
    fetch: (input, init) => win.fetch(input, init),
    getUserMedia: devices?.getUserMedia ? (constraints) => devices.getUserMedia(constraints) : undefined,
    loadMedia,
    captchaToken,
    prefetchCaptcha: (doc, scriptUrl, siteKey, user) => {
      loadCaptcha(doc, scriptUrl, siteKey, user).catch(() => {});
    },
    releaseCaptcha,
    setTimeout: (fn, ms) => win.setTimeout(fn, ms),
    clearTimeout: (id) => win.clearTimeout(id as number),
  };
}
