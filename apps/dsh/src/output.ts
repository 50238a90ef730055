import { escapeTerminal, textWithin } from '@dsh/context'

/** Plain-text table: every cell escaped (`escapeTerminal`), columns padded to the widest cell. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = rows.map((row) => row.map((cell) => escapeTerminal(cell)))
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)))
  const line = (row: readonly string[]): string =>
    row
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n')
}

/** Exact machine-readable output: no escaping beyond JSON's own. */
export function printJson(value: unknown, out: NodeJS.WritableStream = process.stdout): void {
  out.write(`${JSON.stringify(value, null, 2)}\n`)
}

export function formatTime(epochMs: number): string {
  return new Date(epochMs)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z')
}

/**
 * The first line of `text` for a one-line summary: at most `max` UTF-16 code
 * units, a longer one cut between characters (never inside a surrogate pair)
 * and ended with `…`. Not escaped: print it through `safe`.
 */
export function firstLine(text: string, max = 100): string {
  const line = text.split('\n', 1)[0] ?? ''
  return textWithin(line, max)
}
