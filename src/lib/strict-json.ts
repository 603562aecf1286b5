/**
 * What a JSON body may be on the wire, beyond what JSON.parse checks. RFC 8259
 * (section 8.1) has JSON between systems in UTF-8 without a byte-order mark;
 * JSON.parse keeps the last of two equal keys (so `{"amountUsdCents":-5,
 * "amountUsdCents":7}` read as 7 here and maybe -5 elsewhere) and takes a
 * `\ud800` escape that no UTF-8 store can hold (it came back as U+FFFD). All
 * three are refused rather than guessed at. Pure functions, no I/O.
 */

/** Where and what, never the rejected text: the shape of `issuesOf` in ./validation.ts. */
export interface JsonIssue {
  path: string;
  code: "invalid_utf8" | "duplicate_key" | "ill_formed_unicode";
  message: string;
}

export type StrictJson =
  | { ok: true; text: string; value: unknown }
  /** Declared in another charset, or starts with a byte-order mark: 415. */
  | { ok: false; reason: "unsupported_encoding" }
  /** Not JSON: the caller keeps its usual malformed-JSON answer for this text. */
  | { ok: false; reason: "malformed_json"; text: string }
  /** Not UTF-8, or JSON that JSON.parse takes but that is ambiguous or not text: 400. */
  | { ok: false; reason: "refused"; issue: JsonIssue };

/** The media types hono's validator parses as JSON: application/json and application/<x>+json, any parameters. */
const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

export const isJsonContentType = (contentType: string | null | undefined) =>
  JSON_MEDIA_TYPE.test((contentType ?? "").split(";")[0]!.trim());

/** No charset parameter, or only `utf-8` / `utf8` (any case, quoted or not). */
export function declaresUtf8(contentType: string | null | undefined): boolean {
  for (const parameter of (contentType ?? "").split(";").slice(1)) {
    const [name, ...rest] = parameter.split("=");
    if (name?.trim().toLowerCase() !== "charset") continue;
    const charset = rest
      .join("=")
      .trim()
      .replace(/^"(.*)"$/, "$1")
      .toLowerCase();
    if (charset !== "utf-8" && charset !== "utf8") return false;
  }
  return true;
}

/** UTF-8 (EF BB BF), UTF-16 (FE FF, FF FE; the latter also starts UTF-32 LE) or UTF-32 BE (00 00 FE FF). */
export function hasByteOrderMark(bytes: Uint8Array): boolean {
  const [a, b, c, d] = bytes;
  return (
    (a === 0xef && b === 0xbb && c === 0xbf) ||
    (a === 0xfe && b === 0xff) ||
    (a === 0xff && b === 0xfe) ||
    (a === 0 && b === 0 && c === 0xfe && d === 0xff)
  );
}

/** The text, or null if the bytes are not UTF-8 (the default decoder would put U+FFFD in silently). */
export function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    // ignoreBOM keeps a BOM in the text rather than dropping it unseen (readStrictJson refuses one first).
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
}

const nativeIsWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** No lone UTF-16 surrogate: the string can be written as UTF-8. */
export const isWellFormed = (s: string): boolean =>
  nativeIsWellFormed ? nativeIsWellFormed.call(s) : !LONE_SURROGATE.test(s);

interface Frame {
  /** The keys seen so far; null for an array. */
  keys: Set<string> | null;
  /** The current key, or the current index of an array. */
  segment: string | number;
  expectingKey: boolean;
}

const pathOf = (frames: Frame[], last?: string) =>
  [...frames.map((f) => String(f.segment)), ...(last === undefined ? [] : [last])].join(".");

/** The index of the quote that closes a string opened before `from` (text.length when there is none). */
function closingQuote(text: string, from: number): number {
  for (let at = from; ; at++) {
    at = text.indexOf('"', at);
    if (at < 0) return text.length;
    // A quote preceded by an odd number of backslashes is escaped.
    let slashes = 0;
    while (text[at - 1 - slashes] === "\\") slashes++;
    if (slashes % 2 === 0) return at;
  }
}

/**
 * The first duplicate key (at any depth) or ill-formed string (keys
 * included) in `text`, which JSON.parse has already accepted. Walks the
 * text, since the parsed value has lost duplicates; each key is decoded with
 * JSON.parse, so `"a"` and `"\u0061"` are the same key.
 */
export function findJsonTextIssue(text: string): JsonIssue | null {
  const frames: Frame[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    const top = frames[frames.length - 1];
    if (ch === '"') {
      const end = closingQuote(text, i + 1);
      const token = text.slice(i, end + 1);
      const escaped = token.includes("\\");
      i = end + 1;
      if (top?.keys && top.expectingKey) {
        // Only an escape makes a key differ from its text between the quotes.
        const key = escaped ? (JSON.parse(token) as string) : token.slice(1, -1);
        // The object's path, not the key: an ill-formed key is never echoed.
        if (!isWellFormed(key))
          return {
            path: pathOf(frames.slice(0, -1)),
            code: "ill_formed_unicode",
            message: "a key is not well-formed Unicode (a lone surrogate)",
          };
        if (top.keys.has(key))
          return {
            path: pathOf(frames.slice(0, -1), key),
            code: "duplicate_key",
            message: "the same key appears twice in one object",
          };
        top.keys.add(key);
        top.segment = key;
        top.expectingKey = false;
        // A value: only an escape (or text not from a UTF-8 decoder) can hold a lone surrogate, so most are not decoded.
      } else if ((token.includes("\\u") || !isWellFormed(token)) && !isWellFormed(JSON.parse(token) as string)) {
        return {
          path: pathOf(frames),
          code: "ill_formed_unicode",
          message: "a string is not well-formed Unicode (a lone surrogate)",
        };
      }
      continue;
    }
    if (ch === "{") frames.push({ keys: new Set(), segment: "", expectingKey: true });
    else if (ch === "[") frames.push({ keys: null, segment: 0, expectingKey: false });
    else if (ch === "}" || ch === "]") frames.pop();
    else if (ch === "," && top) {
      if (top.keys) top.expectingKey = true;
      else top.segment = (top.segment as number) + 1;
    }
    i += 1;
  }
  return null;
}

/**
 * A JSON body as sent, read strictly: UTF-8 with no byte-order mark and no
 * other declared charset, valid JSON, no key twice in an object, no lone
 * surrogate in any string.
 */
export function readStrictJson(bytes: Uint8Array, contentType: string | null | undefined): StrictJson {
  if (!declaresUtf8(contentType) || hasByteOrderMark(bytes)) return { ok: false, reason: "unsupported_encoding" };
  const text = decodeUtf8(bytes);
  if (text === null)
    return {
      ok: false,
      reason: "refused",
      issue: { path: "", code: "invalid_utf8", message: "the body is not valid UTF-8" },
    };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: "malformed_json", text };
  }
  const issue = findJsonTextIssue(text);
  return issue ? { ok: false, reason: "refused", issue } : { ok: true, text, value };
}
