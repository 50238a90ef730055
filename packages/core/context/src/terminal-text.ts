import { textHead } from './text-head.js'

/**
 * Text from data (ids, paths, messages, a client's input) made safe to print
 * on a terminal, so data can never drive the operator's terminal or forge
 * output:
 *
 * - C0 controls (U+0000–U+001F, newline, CR, tab, ESC and BEL included), DEL
 *   (U+007F) and C1 controls (U+0080–U+009F) become `\xHH`: `ESC[2J` prints
 *   as `\x1b[2J`, so text cannot set the window title, move the cursor,
 *   colour the output or start a forged line;
 * - bidi overrides, embeddings, isolates and marks (U+202A–U+202E,
 *   U+2066–U+2069, U+200E, U+200F, U+061C), zero-width characters (U+200B,
 *   U+2060), the BOM (U+FEFF) and lone surrogates become `\uHHHH`, so text
 *   cannot be shown reordered or hidden.
 *
 * Printable text (any script, emoji) is kept, and escaping is idempotent: a
 * backslash is not a control.
 */
const UNSAFE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point of this pattern
  /[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

export interface EscapeTerminalOptions {
  /**
   * Text longer than this many UTF-16 code units is first cut there (never
   * inside a surrogate pair) and ends in `…`, so the work and the output are
   * bounded whatever the input's size (for text a client chose). Default: no
   * cut.
   */
  readonly max?: number
}

/**
 * `text` escaped for a terminal (see above). The options are an object, not a
 * number: `cells.map(escapeTerminal)` would pass each index as a cut, so it
 * does not type-check.
 */
export function escapeTerminal(text: string, options: EscapeTerminalOptions = {}): string {
  const { max } = options
  const kept = max !== undefined && text.length > max ? `${textHead(text, max)}…` : text
  return kept.replace(UNSAFE, (ch) => {
    const code = ch.charCodeAt(0)
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
  })
}
