import { execFile, spawn } from 'node:child_process'
import { join } from 'node:path'
import { startModelServer } from '@dsh/driver-openai/testing'
import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// A PostgreSQL outage under the built CLI: `dsh serve` and `dsh mcp` on a
// throwaway cluster that is stopped (pg_ctl stop -m fast) for 10 s and started
// again. Both run with --unhandled-rejections=warn, so an unhandled rejection
// is counted on stderr instead of ending the process (Node's default would
// exit; a process that stays up with none counted would stay up either way).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const token = 'pg-outage-token-0123456789'
const OUTAGE_MS = 10_000
/** Polls after the server is back: this many attempts, 250 ms apart (5 s of waiting; request time comes on top). */
const RECOVERY_POLLS = 20
const UNHANDLED = /UnhandledPromiseRejection|unhandledRejection|Uncaught/g

let cluster: TestCluster
let url: string

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
  url = await cluster.createDatabase()
  const demo = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, 'demo', '--store', url, '--json'],
      { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '' } },
      (error, _stdout, stderr) => resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stderr }),
    )
  })
  expect(demo.code, demo.stderr).toBe(0)
})

afterAll(async () => {
  await cluster?.stop()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `dsh serve --store` with its stderr collected; resolves once it printed where it listens. */
async function serve() {
  const child = spawn(process.execPath, ['--unhandled-rejections=warn', bin, 'serve', '--json', '--store', url], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '', DSH_TOKEN: token },
  })
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const info = await new Promise<{ url: string }>((resolve, reject) => {
    let out = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      out += chunk
      try {
        resolve(JSON.parse(out))
      } catch {
        // wait for the whole object
      }
    })
    void exited.then((code) => reject(new Error(`serve exited early (${String(code)}): ${stderr}`)))
  })
  return { child, info, stderr: () => stderr }
}

/** `dsh mcp --store` under the SDK's client, with its stderr collected and its end noticed. */
async function mcp() {
  const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, ...inherited } = process.env as Record<string, string>
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--unhandled-rejections=warn', bin, 'mcp', '--store', url],
    env: { ...inherited, DSH_STORE: '', DSH_DATABASE_URL: '' },
    stderr: 'pipe',
  })
  let stderr = ''
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8')
  })
  const client = new Client({ name: 'dsh-pg-outage', version: '1.0.0' })
  let closed = false
  client.onclose = () => {
    closed = true
  }
  await client.connect(transport)
  return { client, pid: transport.pid, stderr: () => stderr, closed: () => closed }
}

const PATHS = [
  '/api/sessions',
  '/api/sessions/release-1.4/history',
  '/api/sessions/release-1.4/subagents?scope=descendants',
  '/api/sessions/release-1.4/subagents/release-1.4.researcher/history',
  '/api/search?q=plan',
]

const CALLS: Array<{ name: string; arguments: Record<string, unknown> }> = [
  { name: 'list_sessions', arguments: {} },
  { name: 'show_session', arguments: { id: 'release-1.4' } },
  { name: 'list_agents', arguments: { id: 'release-1.4', scope: 'descendants' } },
  { name: 'search', arguments: { text: 'plan' } },
]

describe('dsh serve and dsh mcp on PostgreSQL through a 10 s outage', () => {
  it('stay up, answer 503 and typed MCP errors during it, answer again within 5 s of polling after it, with no unhandled rejection', async () => {
    const server = await serve()
    const agent = await mcp()
    try {
      const get = async (path: string) => {
        const response = await fetch(`${server.info.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
        return { status: response.status, body: (await response.json()) as { code?: string } }
      }
      for (const path of PATHS) expect((await get(path)).status, path).toBe(200)
      for (const call of CALLS) {
        const result = await agent.client.callTool(call)
        expect(result.isError ?? false, `${call.name}: ${JSON.stringify(result.content)}`).toBe(false)
      }

      await cluster.stopServer()
      const stopped = performance.now()
      let rounds = 0
      const httpCodes = new Set<string>()
      const mcpCodes = new Set<string>()
      while (performance.now() - stopped < OUTAGE_MS) {
        for (const path of PATHS) {
          const { status, body } = await get(path)
          expect(status, `${path} during the outage: ${JSON.stringify(body)}`).toBe(503)
          expect(body.code).toMatch(/^[A-Z][A-Z_]+$/)
          httpCodes.add(body.code!)
        }
        for (const call of CALLS) {
          const result = await agent.client.callTool(call)
          expect(result.isError, `${call.name} during the outage`).toBe(true)
          const code = (result.structuredContent as { error?: { code?: string } }).error?.code
          // A typed failure of the storage behind the tool, never an untyped tool failure.
          expect(code, `${call.name}: ${JSON.stringify(result.content)}`).toMatch(/^SESSION_[A-Z_]+$/)
          mcpCodes.add(code!)
        }
        rounds++
        await sleep(1_000)
      }
      expect(rounds).toBeGreaterThan(0)
      expect(server.child.exitCode).toBeNull()
      expect(agent.closed()).toBe(false)

      await cluster.startServer()
      const back = performance.now()
      const recovered: Record<string, { polls: number; ms: number }> = {}
      for (const path of PATHS) {
        let poll = 0
        for (; ; poll++) {
          const { status } = await get(path)
          if (status === 200) break
          expect(poll, `${path} still ${status} after ${RECOVERY_POLLS} polls`).toBeLessThan(RECOVERY_POLLS)
          await sleep(250)
        }
        recovered[path] = { polls: poll, ms: Math.round(performance.now() - back) }
      }
      for (const call of CALLS) {
        let poll = 0
        for (; ; poll++) {
          const result = await agent.client.callTool(call)
          if (result.isError !== true) break
          expect(poll, `${call.name} still failing after ${RECOVERY_POLLS} polls: ${JSON.stringify(result.content)}`).toBeLessThan(
            RECOVERY_POLLS,
          )
          await sleep(250)
        }
        recovered[call.name] = { polls: poll, ms: Math.round(performance.now() - back) }
      }
      // The figures (failed polls before the first answer, ms from the server accepting connections), for the record, never asserted.
      console.info('pg outage: codes during it', { http: [...httpCodes], mcp: [...mcpCodes] }, 'answered again after (ms)', recovered)

      // Let the background loops (LISTEN re-opens, cache refresh) run their course, then look at both processes.
      await sleep(3_000)
      expect(server.child.exitCode).toBeNull()
      expect(server.child.signalCode).toBeNull()
      expect(agent.closed()).toBe(false)
      expect(agent.pid !== null && isAlive(agent.pid)).toBe(true)
      expect(server.stderr().match(UNHANDLED) ?? [], server.stderr()).toEqual([])
      expect(agent.stderr().match(UNHANDLED) ?? [], agent.stderr()).toEqual([])
    } finally {
      await agent.client.close()
      if (server.child.exitCode === null && server.child.signalCode === null) {
        const exited = new Promise((resolve) => server.child.once('exit', resolve))
        server.child.kill('SIGTERM')
        await exited
      }
    }
  })
})

describe('dsh serve on PostgreSQL follows writes by another process', () => {
  it("tells a session's stream that another process writes it, and that it is at rest once that process is killed", async () => {
    const server = await serve()
    const stream = new AbortController()
    const written: Array<{ sessionId: string; id: string; writer: string }> = []
    const reading = readWritten(`${server.info.url}/api/sessions/release-1.4/stream?token=${token}`, stream.signal, written).catch(
      (error: unknown) => {
        if (!stream.signal.aborted) throw error
      },
    )
    const writer = spawn(process.execPath, [join(import.meta.dirname, 'support', 'pg-appender.mjs'), url, 'release-1.4'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const writerExited = new Promise((resolve) => writer.once('exit', resolve))
    try {
      const acked = new Promise<void>((resolve) => writer.stdout.on('data', (chunk: Buffer) => chunk.includes('ack ') && resolve()))
      await acked
      // The follower reads the change feed every 500 ms; polls bound the wait, never a verdict.
      const told = (state: string) => until(() => written.some((w) => w.sessionId === 'release-1.4' && w.writer === state))
      await told('other-process')
      expect(written.find((w) => w.writer === 'other-process')).toEqual({
        sessionId: 'release-1.4',
        id: 'release-1.4',
        writer: 'other-process',
      })
      writer.kill('SIGKILL')
      await writerExited
      await told('none')
      expect(server.stderr().match(UNHANDLED) ?? [], server.stderr()).toEqual([])
    } finally {
      if (writer.exitCode === null && writer.signalCode === null) writer.kill('SIGKILL')
      stream.abort()
      await reading
      const exited = new Promise((resolve) => server.child.once('exit', resolve))
      server.child.kill('SIGTERM')
      await exited
    }
  })
})

describe('dsh run on PostgreSQL when the server goes away before the turn ends', () => {
  it('exits 1 with HOST_EVENTS_NOT_STORED naming the session, not 130 as if its last events were stored', async () => {
    const model = await startModelServer(() => ({ kind: 'stream', content: ['partial ', 'answer', ' never'], hangAfter: 2 }))
    const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, DSH_BASE_URL: _c, OPENAI_BASE_URL: _d, DSH_MODEL: _e, ...inherited } = process.env
    const run = spawn(process.execPath, [bin, 'run', 'Think hard', '--store', url, '--base-url', model.baseURL], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...inherited, DSH_API_KEY: 'sk-e2e-0d9c7b5a3f1e', DSH_STORE: '', DSH_DATABASE_URL: '' },
    })
    let output = ''
    run.stdout.on('data', (part: Buffer) => (output += part.toString()))
    run.stderr.on('data', (part: Buffer) => (output += part.toString()))
    const exited = new Promise<number | null>((resolve) => run.once('exit', (code) => resolve(code)))
    try {
      await model.hung()
      await until(() => output.includes('partial answer'))
      const id = /^session (\S+)$/m.exec(output)![1]!
      await cluster.stopServer()
      let code: number | null
      try {
        // The interrupted turn's end is appended while the server is away; the host waits for it, then gives up.
        run.kill('SIGINT')
        code = await exited
      } finally {
        await cluster.startServer()
      }
      expect(code, output).toBe(1)
      expect(output).toContain(`of session '${id}' were not stored when the host closed`)
      expect(output).toMatch(/they are lost with this process\. \(HOST_EVENTS_NOT_STORED\)\n$/)
      const shown = await new Promise<string>((resolve) =>
        execFile(process.execPath, [bin, 'show', id, '--json', '--store', url], { env: { ...inherited, DSH_STORE: '' } }, (_e, stdout) =>
          resolve(stdout),
        ),
      )
      const events = (JSON.parse(shown) as { events: Array<{ type: string }> }).events
      expect(events.some((e) => e.type === 'turn/end')).toBe(false)
    } finally {
      if (run.exitCode === null && run.signalCode === null) run.kill('SIGKILL')
      await model.close()
    }
  })
})

/** Collects the `written` events of an SSE stream into `into` until `signal` aborts. */
async function readWritten(streamUrl: string, signal: AbortSignal, into: Array<{ sessionId: string; id: string; writer: string }>) {
  const response = await fetch(streamUrl, { headers: { accept: 'text/event-stream' }, signal })
  expect(response.status).toBe(200)
  const decoder = new TextDecoder()
  let buffered = ''
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true })
    for (let at = buffered.indexOf('\n\n'); at !== -1; at = buffered.indexOf('\n\n')) {
      const block = buffered.slice(0, at)
      buffered = buffered.slice(at + 2)
      const data = /^data: (.*)$/m.exec(block)?.[1]
      if (/^event: written$/m.test(block) && data !== undefined) into.push(JSON.parse(data))
    }
  }
}

/** Waits until `done()` holds: 480 polls 250 ms apart at most (a guard against a hang, not a deadline). */
async function until(done: () => boolean): Promise<void> {
  for (let poll = 0; !done(); poll++) {
    expect(poll, 'still waiting after 480 polls').toBeLessThan(480)
    await sleep(250)
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
