/**
 * The lines of a UTF-8 stream ("\n" ends each; a last one without it is yielded too), read as they
 * arrive, so a reader holds one chunk and one line, never the whole body. Stopping early cancels
 * the stream: the rest is never downloaded.
 */
export async function* textLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      buffer += next.value;
      let start = 0;
      for (let cut = buffer.indexOf("\n"); cut >= 0; cut = buffer.indexOf("\n", start)) {
        yield buffer.slice(start, cut);
        start = cut + 1;
      }
      buffer = buffer.slice(start);
    }
    if (buffer !== "") yield buffer;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
