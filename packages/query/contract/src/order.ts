import type { SessionHeader } from '@dsh/session'

/**
 * Compares two strings by Unicode code point, which is also the byte order of
 * their UTF-8 encodings. JavaScript's `<` compares UTF-16 code units, which
 * puts U+10000.. before U+E000..U+FFFF; SQLite's BINARY collation compares
 * UTF-8 bytes. Using code point order everywhere lets every backend agree.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x !== y) return fixup(x) - fixup(y)
  }
  return a.length - b.length
}

// Moves surrogates (D800..DFFF) above the rest of the BMP (E000..FFFF), so
// that code units compare in code point order.
function fixup(unit: number): number {
  if (unit >= 0xe000) return unit - 0x800
  if (unit >= 0xd800) return unit + 0x2000
  return unit
}

/** The listing order position of a record: `createdAt` ascending, then id. */
export interface RecordKey {
  readonly createdAt: number
  readonly id: string
}

export function compareKeys(a: RecordKey, b: RecordKey): number {
  return a.createdAt !== b.createdAt ? a.createdAt - b.createdAt : compareCodePoints(a.id, b.id)
}

export function keyOf(header: SessionHeader): RecordKey {
  return { createdAt: header.createdAt, id: header.id }
}
