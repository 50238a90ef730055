/**
 * The one order of session ids everywhere in dsh: by Unicode code point,
 * which is also the byte order of their UTF-8 encodings (SQLite's BINARY
 * collation, PostgreSQL's `COLLATE "C"` on a UTF-8 database). JavaScript's
 * `<` compares UTF-16 code units instead, which puts U+10000.. before
 * U+E000..U+FFFF; every in-memory sort of ids uses this function.
 */
export function compareSessionIds(a: string, b: string): number {
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
