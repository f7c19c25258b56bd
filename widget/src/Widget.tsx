import type { Texts } from "./i18n.ts";
import type { WidgetErrorCode, WidgetState } from "./types.ts";

export interface ViewProps {
  state: WidgetState;
  error: WidgetErrorCode | null;
  texts: Texts;
  label: string;
  /** What the polite status region says (empty until the first change). */
  announcement: string;
  onClick: () => void;
  onWarmUp: () => void;
}

/**
 * The view: one real <button>, a polite status region for screen readers and an alert for errors.
 * Both regions are always in the tree so that assistive technology notices their changes.
 */
export function Widget(props: ViewProps) {
  const { state, texts } = props;
  const text =
    state === "connecting"
      ? texts.connecting
      : state === "in-call"
        ? texts.inCall
        : state === "error"
          ? texts.retry
          : props.label;
  return (
    <div class={`w ${state}`}>
      <button
        type="button"
        aria-disabled={state === "connecting" ? "true" : undefined}
        onClick={props.onClick}
        onPointerEnter={props.onWarmUp}
        onFocus={props.onWarmUp}
      >
        <span class="dot" aria-hidden="true" />
        <span>{text}</span>
      </button>
      <p class="sr" role="status" aria-live="polite">
        {props.announcement}
      </p>
      <p class="alert" role="alert">
        {state === "error" && props.error ? texts.errors[props.error] : ""}
      </p>
    </div>
  );
}
