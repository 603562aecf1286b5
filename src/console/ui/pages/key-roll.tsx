import type { RolledKey } from "../../../keys/roll";

/** The choices of grace the pages offer; the API takes any number of seconds up to 7 days. */
const GRACE_CHOICES = [
  [0, "End the old key now"],
  [3_600, "Old key works 1 more hour"],
  [86_400, "Old key works 1 more day"],
  [604_800, "Old key works 7 more days"],
] as const;

/** How long the old key keeps working after a roll; a day unless chosen otherwise. */
export const GraceSelect = (props: { id: string }) => (
  <select id={props.id} name="graceSeconds" aria-label="How long the old key keeps working">
    {GRACE_CHOICES.map(([seconds, label]) => (
      <option value={String(seconds)} selected={seconds === 86_400}>
        {label}
      </option>
    ))}
  </select>
);

/** When the replaced key stops working, beside the new key. */
export const OldKeyEnds = (props: { rolled: RolledKey }) => {
  const at = props.rolled.previousKeyExpiresAt;
  const when = <time id="old-key-expires" datetime={at}>{`${at.slice(0, 10)} ${at.slice(11, 19)} UTC`}</time>;
  return Date.parse(at) <= Date.now() ? (
    <p>The old key has stopped working ({when}).</p>
  ) : (
    <p>The old key keeps working until {when}, then answers 401.</p>
  );
};
