import { escapeTerminal } from '@dsh/context'

/**
 * Safe terminal text. Everything the CLI prints that came from data (ids,
 * event types, labels, paths, snippets, messages) passes through
 * `escapeTerminal` of `@dsh/context` (controls as `\xHH`; bidi, zero-width
 * characters and lone surrogates as `\uHHHH`), so data can never drive the
 * operator's terminal or forge output: a newline in an id cannot start a new
 * table row. `--json` output is exact: JSON.stringify already escapes C0
 * controls, and nothing else is changed there.
 *
 * `safe` is a template tag for printed lines: the literal parts are the CLI's
 * own text (newlines and all); every interpolated value is data and is
 * escaped. `safe\`session ${id}\n\``
 */
export function safe(strings: TemplateStringsArray, ...values: readonly unknown[]): string {
  let text = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) text += escapeTerminal(String(values[i])) + (strings[i + 1] ?? '')
  return text
}
