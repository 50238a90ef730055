import { errorBody } from '@dsh/protocol'
import { HTTP_RETRY_AFTER_SECONDS } from '@dsh/protocol/limits'
import { afterEach, describe, expect, it } from 'vitest'
import type { ApiLimits } from '../src/index.js'
import { RawConnection } from './support/raw-http.js'
import { type Stack, startStack, TOKEN, turn, withQuery } from './support/stack.js'

// What answers may hold, over real sockets on 127.0.0.1: a connection is
// served one request at a time, an answer its client does not take closes
// the connection, and unread answers together have a bound. A client that
// stops reading is a paused socket; a "big" page is larger than the
// loopback's socket buffers on both sides, so it stays unread. Verdicts are
// answers, counts and closed connections; the short drain timeout only keeps
// the waits short.

/** Events of about 2 MB each: the big session's page of 16 is about 32 MB, more than both sides' socket buffers. */
const BIG_TEXT = 'x'.repeat(2_000_000)
const BIG_EVENTS = 16

let stack: Stack | undefined
const clients: RawConnection[] = []

afterEach(async () => {
  for (const client of clients.splice(0)) client.socket.destroy()
  await stack?.close()
  stack = undefined
})

/** A stack with a big session and a small one, counting the history reads the server starts. */
async function serve(limits: Partial<ApiLimits>): Promise<{ stack: Stack; reads: () => number }> {
  let reads = 0
  stack = await startStack({
    limits: { maxHistoryPageBytes: 128 * 1024 * 1024, ...limits },
    wrap: (services) =>
      withQuery(services, (query) => ({
        readHistory: (id, request, signal) => {
          reads += 1
          return query.readHistory(id, request, signal)
        },
      })),
  })
  const big = stack.sessions.create({ id: 'big' })
  for (let i = 0; i < BIG_EVENTS; i++) big.append('user/message', { text: `${i}${BIG_TEXT}` })
  turn(stack.sessions.create({ id: 'small' }), 'hello')
  return { stack, reads: () => reads }
}

function open(s: Stack): RawConnection {
  const client = new RawConnection(s.server.url)
  clients.push(client)
  return client
}

const auth = { Authorization: `Bearer ${TOKEN}` }
const BIG_PAGE = `/api/sessions/big/history?limit=${BIG_EVENTS}`

async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 10))
}

describe('answers', () => {
  it('serves a pipelined burst one request at a time: behind an unread answer nothing starts, the connection closes once the answer waits past drainTimeoutMs, and what waited never runs', async () => {
    const { stack: s, reads } = await serve({ drainTimeoutMs: 1_500 })
    const client = open(s)
    client.socket.pause()
    for (let i = 0; i < 10; i++) client.get(BIG_PAGE, auth)
    // The paused client never reads the close; the server's own count shows it let the socket go.
    await until(() => reads() === 1 && s.server.connections === 1)
    await until(() => s.server.connections === 0)
    expect(reads()).toBe(1)
    // The server still answers others.
    expect((await s.get('/api/sessions/small/history')).status).toBe(200)
  })

  it('answers pipelined requests in order when the client reads them, and closes a connection with more than maxPipelined waiting', async () => {
    const { stack: s } = await serve({ maxPipelined: 4 })
    const reader = open(s)
    for (let i = 0; i < 4; i++) reader.get(`/api/sessions/small/history?limit=${i + 1}`, auth)
    const pages = []
    for (let i = 0; i < 4; i++) pages.push(await reader.response())
    expect(pages.map((page) => [page.status, (JSON.parse(page.body) as { events: unknown[] }).events.length])).toEqual([
      [200, 1],
      [200, 2],
      [200, 3],
      [200, 4],
    ])
    const flood = open(s)
    // One write: node:http parses all seven at once.
    flood.socket.write(
      Array.from(
        { length: 7 },
        () => `GET /api/sessions/small/history HTTP/1.1\r\nHost: ${new URL(s.server.url).host}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`,
      ).join(''),
    )
    await flood.ended
    let answered = 0
    try {
      for (;;) {
        await flood.response()
        answered += 1
      }
    } catch {
      // The connection ended.
    }
    expect(answered).toBeLessThan(7)
  })

  it('answers at most maxConcurrentRequests requests at once; the others wait their turn and are all answered', async () => {
    let active = 0
    let most = 0
    let open = true
    const waiting: Array<() => void> = []
    stack = await startStack({
      limits: { maxConcurrentRequests: 2 },
      wrap: (services) =>
        withQuery(services, (query) => ({
          readHistory: async (id, request, signal) => {
            active += 1
            most = Math.max(most, active)
            // Held until every request has reached the server, so an unbounded host would have all five here.
            if (open) await new Promise<void>((resolve) => waiting.push(resolve))
            active -= 1
            return query.readHistory(id, request, signal)
          },
        })),
    })
    const s = stack
    turn(s.sessions.create({ id: 'small' }), 'hello')
    const answers = Array.from({ length: 5 }, () => s.get('/api/sessions/small/history'))
    await until(() => s.server.connections === 5 && active === 2)
    // The rest have arrived and are waiting; give them the event loop before letting the first two go.
    await new Promise((resolve) => setTimeout(resolve, 100))
    open = false
    for (const resolve of waiting.splice(0)) resolve()
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200])
    expect(most).toBe(2)
  })

  it('refuses a new answer with 503 API_BUSY and Retry-After while unread answers fill maxQueuedBytes, and serves it once they are gone', async () => {
    const { stack: s } = await serve({ maxQueuedBytes: 1024 * 1024 })
    const stalled = open(s)
    stalled.socket.pause()
    stalled.get(BIG_PAGE, auth)
    // The big answer is alone, so it is written even though it is over the bound; the next one is refused until it is gone.
    let busy: Awaited<ReturnType<Stack['get']>> | undefined
    await until(async () => {
      const answer = await s.get('/api/sessions/small/history')
      if (answer.status === 200) return false
      busy = answer
      return true
    })
    expect(busy?.status).toBe(503)
    expect(errorBody.parse(busy?.body).code).toBe('API_BUSY')
    expect(busy?.headers.get('retry-after')).toBe(String(HTTP_RETRY_AFTER_SECONDS))
    stalled.socket.destroy()
    await until(async () => (await s.get('/api/sessions/small/history')).status === 200)
  })
})
