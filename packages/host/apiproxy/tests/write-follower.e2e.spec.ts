import { describe, expect, it } from 'vitest'
import { SseReader } from './support/sse.js'
import { startStack, TOKEN } from './support/stack.js'

/** Resolves once the follower has read the feed `count` times, checking after each of the follower's reads (bounded by counts, not time). */
async function untilReads(reads: () => number, count: number): Promise<void> {
  for (let i = 0; i < 2_400 && reads() < count; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  expect(reads()).toBeGreaterThanOrEqual(count)
}

describe('the change feed follower through an outage', () => {
  it('logs one warning when reading the feed starts failing and one when it works again, however many reads fail', async () => {
    let down = false
    let reads = 0
    const stack = await startStack({
      backend: 'disk',
      wrap: (services) => {
        // The loader is the persistence service itself (JSONL: change feed and writer locks).
        const persistence = services.sessionLoader as NonNullable<typeof services.sessionPersistence>
        return {
          ...services,
          sessionPersistence: {
            writerOf: (id, signal) => persistence.writerOf!(id, signal),
            async changes(cursor, signal) {
              reads++
              if (down) throw new Error('the server is down')
              return persistence.changes!(cursor, signal)
            },
          },
        }
      },
    })
    try {
      const stream = await SseReader.open(`${stack.server.url}/api/sessions/x/stream?token=${TOKEN}`)
      await stream.next((e) => e.event === 'ready')
      await untilReads(() => reads, 2)
      const warnings = () => stack.logs.filter((log) => log.message.includes('the change feed'))
      expect(warnings()).toEqual([])

      down = true
      await untilReads(() => reads, reads + 6)
      expect(warnings().map((log) => log.message)).toEqual([
        'dsh: the HTTP API failed to follow the change feed; it is read again every 500 ms, and logged again when it works.',
      ])
      expect(String(warnings()[0]!.error)).toContain('the server is down')

      down = false
      await untilReads(() => reads, reads + 2)
      expect(warnings()).toHaveLength(2)
      expect(warnings()[1]!.message).toMatch(/^dsh: the HTTP API follows the change feed again after [6-9]\d* failed read\(s\)\.$/)

      down = true
      await untilReads(() => reads, reads + 3)
      expect(warnings()).toHaveLength(3)
      stream.close()
    } finally {
      await stack.close()
    }
  })
})
