import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from '@dsh/context'
import { createHost } from '@dsh/host'
import type { SessionSeq, StoredSessionEvent } from '@dsh/session'
import { tempDir } from '@dsh/test-kit'
import type { SpanExporter } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import { replaySessionTraces, sessionTelemetryPlugin } from '../src/index.js'
import { MAX_SPAN_TEXT } from '../src/writer.js'
import { afterThisTest, receiver } from './support/cleanup.js'

function turns(count: number): StoredSessionEvent[] {
  const events: StoredSessionEvent[] = []
  const add = (type: string, data: unknown) =>
    events.push({ type, seq: events.length as SessionSeq, time: 1_000 + events.length, data: data as never })
  for (let turn = 1; turn <= count; turn++) {
    add('turn/start', { turn })
    add('assistant/message', { turn, text: `answer ${turn}` })
    add('turn/end', { turn, reason: 'completed' })
  }
  return events
}

describe('what the plugin holds is bounded', () => {
  it('a replay of a log with more spans than the queue holds exports every span: it waits for the collector instead of dropping', async () => {
    const otlp = await receiver()
    const TURNS = 60
    const result = await replaySessionTraces(
      [{ header: { id: 'long', delegationDepth: 0 }, inheritedEventCount: 0, events: turns(TURNS) }],
      { otlp: otlp.url, maxQueueSize: 8, maxBatchSize: 4 },
    )
    // Two spans a turn (the turn and its step), fifteen times the queue.
    expect(result.stats).toEqual({ exported: TURNS * 2, dropped: 0, failedExports: 0, pending: 0 })
    expect(new Set(otlp.spans.map((span) => span.spanId)).size).toBe(TURNS * 2)
  })

  it('a replay to a collector that answers 500 counts every span as dropped, says why in its result, and warns once in words for a replay', async () => {
    let requests = 0
    const failing = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        requests++
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"nope"}')
      })
    })
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve))
    afterThisTest(() => new Promise<void>((resolve) => failing.close(() => resolve())))
    const warnings: string[] = []
    const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
    const result = await replaySessionTraces([{ header: { id: 'lost', delegationDepth: 0 }, inheritedEventCount: 0, events: turns(3) }], {
      otlp: `http://127.0.0.1:${(failing.address() as AddressInfo).port}/v1/traces`,
      logger,
    })
    expect(requests).toBeGreaterThan(0)
    expect(result.stats).toMatchObject({ exported: 0, dropped: 6, pending: 0 })
    expect(result.dropReason).toMatch(/^the export failed \(/)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('The replay goes on to its end and then reports how many spans it could not deliver.')
    expect(warnings[0]).not.toContain('telemetry stats')
  })

  it('an exporter that never answers fails its batch: flush and disposal end, the spans are counted as dropped, with one warning', async () => {
    const { dir, cleanup } = tempDir('dsh-otel-hung-')
    afterThisTest(cleanup)
    const h = await createHost({ root: dir })
    let exports = 0
    let shutdowns = 0
    const exporter: SpanExporter = {
      export: () => void exports++,
      shutdown: () => {
        shutdowns++
        return new Promise<void>(() => undefined)
      },
    }
    const warnings: string[] = []
    const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
    await h.ctx.activate(sessionTelemetryPlugin({ exporter, logger }))
    const session = h.sessions.create({ id: 'hung' })
    session.append('turn/start', { turn: 1 })
    session.append('turn/end', { turn: 1, reason: 'completed' })
    const telemetry = h.ctx.require('sessionTelemetry')
    await telemetry.flush()
    // One span: a turn with no model output has no step.
    expect(telemetry.stats()).toEqual({ exported: 0, dropped: 1, failedExports: 1, pending: 0 })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('did not answer')
    // Disposal ends although the exporter's shutdown never does.
    await h.dispose()
    expect([exports, shutdowns]).toEqual([1, 1])
  })

  it('text from the log is capped on a span: names, attributes and status messages', async () => {
    const otlp = await receiver()
    const { dir, cleanup } = tempDir('dsh-otel-big-')
    afterThisTest(cleanup)
    const h = await createHost({ root: dir })
    afterThisTest(() => h.dispose())
    await h.ctx.activate(sessionTelemetryPlugin({ otlp: otlp.url }))
    const big = 'w'.repeat(200_000)
    const session = h.sessions.create({ id: 'big' })
    session.append('turn/start', { turn: 1 })
    session.append('tool/call', { turn: 1, callId: big, name: big, arguments: {} })
    session.append('tool/result', { turn: 1, callId: big, content: { code: big, message: big }, isError: true })
    session.append('assistant/error', { turn: 1, code: 'E', message: big })
    session.append('turn/end', { turn: 1, reason: big })
    await h.ctx.require('sessionTelemetry').flush()
    expect(otlp.spans.map((span) => span.name).sort()).toEqual([
      'chat',
      'chat',
      `execute_tool ${'w'.repeat(MAX_SPAN_TEXT - 14)}…`,
      'invoke_agent dsh',
    ])
    for (const span of otlp.spans) {
      expect(span.name.length).toBeLessThanOrEqual(MAX_SPAN_TEXT)
      expect(span.status.message?.length ?? 0).toBeLessThanOrEqual(MAX_SPAN_TEXT)
      for (const value of Object.values(span.attributes))
        if (typeof value === 'string') expect(value.length).toBeLessThanOrEqual(MAX_SPAN_TEXT)
    }
    const tool = otlp.spans.find((span) => span.name.startsWith('execute_tool'))!
    expect(tool.status.message).toMatch(/^w+…$/)
    expect(tool.attributes['gen_ai.tool.name']).toBe(big.slice(0, MAX_SPAN_TEXT))
    const turn = otlp.spans.find((span) => span.name === 'invoke_agent dsh')!
    expect(turn.status.message).toMatch(/^E: w+…$/)
  })
})
