import { describe, expect, it } from "vitest";
import { textLines } from "../../src/lib/lines";

/** A stream of these byte chunks, counting how often it was cancelled. */
function chunked(chunks: Uint8Array[]) {
  const state = { cancelled: 0 };
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++]!);
      else controller.close();
    },
    cancel() {
      state.cancelled++;
    },
  });
  return { stream, state };
}

const bytes = (text: string) => new TextEncoder().encode(text);

async function collect(lines: AsyncIterable<string>) {
  const all: string[] = [];
  for await (const line of lines) all.push(line);
  return all;
}

describe("textLines", () => {
  it("splits lines across chunk boundaries, keeps empty lines and a last line without its newline", async () => {
    const { stream } = chunked([bytes("a\nb"), bytes("c\n"), bytes("\n"), bytes("d")]);
    expect(await collect(textLines(stream))).toEqual(["a", "bc", "", "d"]);
  });

  it("decodes a character whose bytes fall in two chunks", async () => {
    const all = bytes("é\nü\n");
    const { stream } = chunked([all.slice(0, 1), all.slice(1, 4), all.slice(4)]);
    expect(await collect(textLines(stream))).toEqual(["é", "ü"]);
  });

  it("cancels the stream when the reader stops early: the rest is never read", async () => {
    const { stream, state } = chunked([bytes("one\n"), bytes("two\n"), bytes("three\n")]);
    for await (const line of textLines(stream)) if (line === "one") break;
    expect(state.cancelled).toBe(1);
  });
});
