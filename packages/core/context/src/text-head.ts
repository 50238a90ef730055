/**
 * The start of `text` a bound of `max` UTF-16 code units keeps: `text` itself
 * when it fits, else its first `max` units, one fewer when the last of them
 * would be the first half of a surrogate pair (so no character is cut in
 * two). Callers mark the cut their own way (`…`, how much was left out).
 */
export function textHead(text: string, max: number): string {
  if (text.length <= max) return text
  const end = Math.max(0, max)
  const last = text.charCodeAt(end - 1)
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? end - 1 : end)
}

/**
 * `text` held to `max` UTF-16 code units in all: `text` itself when it fits,
 * else its {@link textHead} of `max - 1` units and `…`. For previews whose
 * bound includes the mark (a line, a span attribute, a value in a message).
 */
export function textWithin(text: string, max: number): string {
  return text.length <= max ? text : `${textHead(text, max - 1)}…`
}
