import { checkEventBytes, EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'

/*
 * The event cap (`EVENT_MAX_BYTES`) on the lines a batch writes. Each is
 * measured on the string before any byte of it is written, and only when it
 * could be over the cap: a UTF-16 code unit is at most 3 UTF-8 bytes, so a
 * text of at most a third of the cap in code units is never measured.
 */

/** Whether a packed line (several events on one line) is within the cap; a packed line over it is written as one line per event instead. */
export function packedLineFits(line: string): boolean {
  return line.length * 3 <= EVENT_MAX_BYTES || Buffer.byteLength(line) <= EVENT_MAX_BYTES
}

/** Throws `SESSION_PERSISTENCE_EVENT_TOO_LARGE` when a line of `text` (newline-separated lines of one event each) is over the cap. */
export function checkEventLines(text: string): void {
  if (text.length * 3 <= EVENT_MAX_BYTES) return
  for (let start = 0; start < text.length; ) {
    const newline = text.indexOf('\n', start)
    const end = newline === -1 ? text.length : newline
    if ((end - start) * 3 > EVENT_MAX_BYTES) checkEventBytes(seqOfLine(text, start), Buffer.byteLength(text.slice(start, end)))
    start = end + 1
  }
}

/** The seq an event line names near its start (`-1` when none is found there). */
function seqOfLine(text: string, start: number): number {
  const match = /"seq":(\d+)/.exec(text.slice(start, start + 4096))
  return match === null ? -1 : Number(match[1])
}
