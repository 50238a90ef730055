/**
 * Safe terminal text. Everything the CLI prints that came from data (ids,
 * event types, labels, paths, snippets, messages) passes through
 * `escapeTerminal`, so data can never drive the operator's terminal or forge
 * output:
 *
 * - C0 controls (U+0000–U+001F, newline and tab included), DEL (U+007F) and
 *   C1 controls (U+0080–U+009F) become `\xHH`: `ESC[2J` prints as `\x1b[2J`,
 *   and a newline in an id cannot start a new table row;
 * - bidi overrides, embeddings, isolates and marks (U+202A–U+202E,
 *   U+2066–U+2069, U+200E, U+200F, U+061C) become `\uHHHH`, so text cannot
 *   be displayed reversed.
 *
 * `--json` output is exact: JSON.stringify already escapes C0 controls, and
 * nothing else is changed there.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point of this function
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

export function escapeTerminal(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    const code = ch.charCodeAt(0)
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
  })
}

/**
 * A template tag for printed lines: the literal parts are the CLI's own text
 * (newlines and all); every interpolated value is data and is escaped.
 * `safe\`session ${id}\n\``
 */
export function safe(strings: TemplateStringsArray, ...values: readonly unknown[]): string {
  let text = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) text += escapeTerminal(String(values[i])) + (strings[i + 1] ?? '')
  return text
}
