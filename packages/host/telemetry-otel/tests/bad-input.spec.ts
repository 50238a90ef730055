import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from '@dsh/context'
import { createHost, type Host } from '@dsh/host'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { parseOtlpEndpoint, replaySessionTraces, SessionTelemetryError, sessionTelemetryPlugin } from '../src/index.js'
import { afterThisTest, receiver } from './support/cleanup.js'

async function host(): Promise<Host> {
  const { dir, cleanup } = tempDir('dsh-otel-bad-')
  afterThisTest(cleanup)
  const h = await createHost({ root: dir })
  afterThisTest(() => h.dispose())
  return h
}

/** A URL nobody listens on: a port the system gave out and took back. */
async function unreachableUrl(): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}/v1/traces`
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run()
  } catch (error) {
    return error instanceof SessionTelemetryError ? error.code : `not a SessionTelemetryError: ${String(error)}`
  }
  return undefined
}

describe('an unreachable collector', () => {
  it('never fails or holds up an append: the queue is bounded, lost spans are counted, and there is one warning', async () => {
    const h = await host()
    const warnings: string[] = []
    const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
    const url = await unreachableUrl()
    await h.ctx.activate(sessionTelemetryPlugin({ otlp: { url, timeoutMs: 200 }, maxQueueSize: 4, maxBatchSize: 2, logger }))
    const telemetry = h.ctx.require('sessionTelemetry')
    const session = h.sessions.create({ id: 'busy' })
    const TURNS = 20
    for (let turn = 1; turn <= TURNS; turn++) {
      session.append('turn/start', { turn })
      session.append('assistant/message', { turn, text: `answer ${turn}`, usage: { input: 1, output: 1 } })
      session.append('turn/end', { turn, reason: 'completed' })
    }
    // Every append returned (they are synchronous) while the first export was still under way:
    // the appends did not wait for the collector, and what did not fit was dropped at once.
    expect(session.seq).toBe(TURNS * 3)
    const during = telemetry.stats()
    expect(during.pending).toBeGreaterThan(0)
    expect(during.dropped).toBe(TURNS * 2 - during.pending)
    await telemetry.flush()
    const after = telemetry.stats()
    // Two spans a turn (the turn and its step); none reached the collector, all are counted.
    expect(after).toEqual({ exported: 0, dropped: TURNS * 2, failedExports: after.failedExports, pending: 0 })
    expect(after.failedExports).toBeGreaterThan(0)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('OpenTelemetry spans are being dropped')
    expect(warnings[0]).toContain(url)
    // The log itself is whole and durable.
    await h.sessions.flush(session)
    expect((await h.persistence.load(session.id)).events).toHaveLength(TURNS * 3)
  })

  it('a replay to it reports every span as dropped, and warns once', async () => {
    const warnings: string[] = []
    const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
    const events = [
      { type: 'turn/start', seq: 0, time: 1_000, data: { turn: 1 } },
      { type: 'tool/call', seq: 1, time: 1_001, data: { turn: 1, callId: 'c', name: 'x', arguments: {} } },
      { type: 'tool/result', seq: 2, time: 1_002, data: { turn: 1, callId: 'c', content: null } },
      { type: 'turn/end', seq: 3, time: 1_003, data: { turn: 1, reason: 'completed' } },
    ] as never
    const result = await replaySessionTraces([{ header: { id: 's', delegationDepth: 0 }, inheritedEventCount: 0, events }], {
      otlp: { url: await unreachableUrl(), timeoutMs: 200 },
      logger,
    })
    expect(result.stats).toMatchObject({ exported: 0, dropped: 3, pending: 0 })
    expect(warnings).toHaveLength(1)
  })
})

describe('odd logs', () => {
  it('an error result without content fails its tool span with an empty message; the replay goes on', async () => {
    const otlp = await receiver()
    const events = [
      { type: 'turn/start', seq: 0, time: 1_000, data: { turn: 1 } },
      { type: 'tool/call', seq: 1, time: 1_001, data: { turn: 1, callId: 'c', name: 'x', arguments: {} } },
      { type: 'tool/result', seq: 2, time: 1_002, data: { turn: 1, callId: 'c', isError: true } },
      { type: 'turn/end', seq: 3, time: 1_003, data: { turn: 1, reason: 'completed' } },
    ] as never
    const result = await replaySessionTraces([{ header: { id: 's', delegationDepth: 0 }, inheritedEventCount: 0, events }], {
      otlp: otlp.url,
    })
    expect(result.stats).toMatchObject({ exported: 3, dropped: 0 })
    expect(otlp.spans.find((span) => span.name === 'execute_tool x')).toMatchObject({
      status: { code: 2 },
      attributes: { 'error.type': '_OTHER' },
    })
  })
})

describe('options', () => {
  it('a malformed endpoint is SESSION_TELEMETRY_INVALID_ENDPOINT, before anything is opened', () => {
    for (const bad of ['not a url', 'ftp://collector/v1/traces', '127.0.0.1:4318', 'http://user:secret@collector:4318']) {
      expect(
        codeOf(() => sessionTelemetryPlugin({ otlp: bad })),
        bad,
      ).toBe('SESSION_TELEMETRY_INVALID_ENDPOINT')
    }
    expect(codeOf(() => parseOtlpEndpoint('http://user:secret@collector:4318'))).toBe('SESSION_TELEMETRY_INVALID_ENDPOINT')
    try {
      parseOtlpEndpoint('http://user:secret@collector:4318')
    } catch (error) {
      expect((error as Error).message).not.toContain('secret')
    }
  })

  it('a bare origin gets the standard traces path; any other path is kept', () => {
    expect(parseOtlpEndpoint('http://collector:4318')).toBe('http://collector:4318/v1/traces')
    expect(parseOtlpEndpoint('https://ingest.example/otlp/v1/traces')).toBe('https://ingest.example/otlp/v1/traces')
  })

  it('bad sizes and two destinations are SESSION_TELEMETRY_INVALID_OPTIONS; a replay needs a destination', async () => {
    expect(codeOf(() => sessionTelemetryPlugin({ maxQueueSize: 0 }))).toBe('SESSION_TELEMETRY_INVALID_OPTIONS')
    expect(codeOf(() => sessionTelemetryPlugin({ exportDelayMs: 1.5 }))).toBe('SESSION_TELEMETRY_INVALID_OPTIONS')
    expect(codeOf(() => sessionTelemetryPlugin({ otlp: { url: 'http://c:4318', timeoutMs: -1 } }))).toBe(
      'SESSION_TELEMETRY_INVALID_OPTIONS',
    )
    const exporter = { export: () => undefined, shutdown: () => Promise.resolve() }
    expect(codeOf(() => sessionTelemetryPlugin({ otlp: 'http://c:4318', exporter }))).toBe('SESSION_TELEMETRY_INVALID_OPTIONS')
    await expect(replaySessionTraces([], {})).rejects.toMatchObject({ code: 'SESSION_TELEMETRY_INVALID_OPTIONS' })
  })

  it('an otlp option of the wrong shape, or a header a request cannot carry, is SESSION_TELEMETRY_INVALID_OPTIONS; a header value is never quoted', () => {
    const url = 'http://c:4318'
    for (const bad of [
      null,
      {},
      { url: 42 },
      42,
      { url, headers: 'x' },
      { url, headers: { a: 1 } },
      { url, headers: { 'bad name': 'v' } },
    ]) {
      expect(
        codeOf(() => sessionTelemetryPlugin({ otlp: bad as never })),
        JSON.stringify(bad),
      ).toBe('SESSION_TELEMETRY_INVALID_OPTIONS')
    }
    try {
      sessionTelemetryPlugin({ otlp: { url, headers: { 'x-api-key': 'secret\r\nInjected: 1' } } })
      expect.unreachable()
    } catch (error) {
      expect((error as SessionTelemetryError).code).toBe('SESSION_TELEMETRY_INVALID_OPTIONS')
      expect((error as Error).message).toContain('x-api-key')
      expect((error as Error).message).not.toContain('secret')
    }
  })

  it('with no exporter the plugin is inert: no listener, no span, no event in any log', async () => {
    const h = await host()
    await h.ctx.activate(sessionTelemetryPlugin())
    const telemetry = h.ctx.require('sessionTelemetry')
    expect(telemetry.enabled).toBe(false)
    const parent = h.sessions.create({ id: 'p' })
    parent.append('turn/start', { turn: 1 })
    parent.append('tool/call', { turn: 1, callId: 'c', name: 'subagent', arguments: {} })
    const handle = h.subagents.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: 'go' })
    await handle.done
    const child = await h.persistence.load(handle.id)
    expect(child.events.map((event) => event.type)).not.toContain('telemetry/trace-context')
    expect(telemetry.stats()).toEqual({ exported: 0, dropped: 0, failedExports: 0, pending: 0 })
  })
})
