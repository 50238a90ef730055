import type { HistoryPageBody, WireStoredEvent } from '@dsh/protocol'
import { elidedEvent } from '@dsh/protocol/limits'

/**
 * A history page within `maxBytes`: the UTF-8 bytes of its events' JSON.
 * Events are kept from the newest back, and the page stops before the one
 * that would take it past the cap; `nextBefore` then continues from the
 * oldest event kept, so a client pages through everything. An event that
 * alone is over the cap is answered as an elided event (`page-too-large`)
 * in its place. The newest event is always kept (elided if need be), so
 * every page makes progress.
 */
export function capHistoryPage(page: HistoryPageBody, maxBytes: number): HistoryPageBody {
  const { events } = page
  const kept: WireStoredEvent[] = []
  let used = 0
  let i = events.length - 1
  for (; i >= 0; i--) {
    let event = events[i] as WireStoredEvent
    let bytes = jsonBytes(event)
    if (bytes > maxBytes) {
      event = elidedEvent(event.seq, event.time, { bytes, reason: 'page-too-large', type: event.type })
      bytes = jsonBytes(event)
    }
    if (kept.length > 0 && used + bytes > maxBytes) break
    kept.push(event)
    used += bytes
  }
  if (i < 0 && kept.every((event, k) => event === events[events.length - 1 - k])) return page
  kept.reverse()
  const nextBefore = i >= 0 ? (kept[0] as WireStoredEvent).seq : page.nextBefore
  const { header, inheritedEventCount, total } = page
  return { header, inheritedEventCount, events: kept, ...(nextBefore === undefined ? {} : { nextBefore }), total }
}

function jsonBytes(event: WireStoredEvent): number {
  return Buffer.byteLength(JSON.stringify(event))
}
