import type { SnippetMark } from './types.js'

// A search snippet marks its matched words in `[…]`, and the text around
// them may hold brackets of its own (`items[0]`). So a backend has its
// engine mark matches with markers no event text can hold, and this module
// turns them into the wire's form: the snippet with `[…]` around each match,
// and `marks`, where each `[…]` is, so a reader tells a match from the
// text's own brackets.

/** The opening and closing marker a backend's snippet function is given. */
export interface SnippetMarkers {
  readonly open: string
  readonly close: string
}

let markers: SnippetMarkers | undefined

/**
 * This process's markers: letters and digits only (they go into SQL text and
 * `ts_headline` options as they are), drawn at random once. Event text cannot
 * forge one: the markers never leave the process, `markedSnippet` takes them
 * out of every snippet.
 */
export function snippetMarkers(): SnippetMarkers {
  if (markers === undefined) {
    // Loaded on first use: a process that never searches never pays for node:crypto.
    const nonce = process.getBuiltinModule('node:crypto').randomBytes(12).toString('hex')
    markers = Object.freeze({ open: `dshmatch${nonce}o`, close: `dshmatch${nonce}c` })
  }
  return markers
}

/**
 * The wire's snippet of an engine's snippet marked with `snippetMarkers()`:
 * each marked match becomes `[match]`, and `marks` says where each is. A
 * marker without its pair (never produced by an engine) is dropped.
 */
export function markedSnippet(
  raw: string,
  { open, close }: SnippetMarkers = snippetMarkers(),
): {
  readonly snippet: string
  readonly marks: readonly SnippetMark[]
} {
  let snippet = ''
  const marks: SnippetMark[] = []
  let at = 0
  for (;;) {
    const start = raw.indexOf(open, at)
    const end = start === -1 ? -1 : raw.indexOf(close, start + open.length)
    if (end === -1) break
    const word = raw.slice(start + open.length, end).replaceAll(open, '')
    snippet += raw.slice(at, start).replaceAll(close, '')
    marks.push([snippet.length, snippet.length + word.length + 2])
    snippet += `[${word}]`
    at = end + close.length
  }
  snippet += raw.slice(at).replaceAll(open, '').replaceAll(close, '')
  return { snippet, marks }
}
