import { createModelClient, createOpenAIDriver, runAgent } from '@dsh/driver-openai'
import type { Host } from '@dsh/host'
import { type Session, type SessionEvent, SessionId } from '@dsh/session'
import type { SubagentRun, SubagentRuntime, SubagentTool } from '@dsh/subagent'
import { subagentControlTools } from '@dsh/tool-subagent-control'
import type { CommandIo, ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { openHost, warnIfExposed } from '../host-access.js'
import { printJson } from '../output.js'
import { escapeTerminal, safe } from '../terminal.js'

/** The subagent-control tools an agent started by the CLI (or the MCP server) may call. */
export function controlToolsOf(runtime: SubagentRuntime): readonly SubagentTool[] {
  return subagentControlTools(runtime)
}

/**
 * `dsh run "<prompt>" [--model M] [--base-url URL] [--resume ID] [--root R]`:
 * one turn of a real agent over an OpenAI-compatible API, with the
 * subagent-control tools, in a session root. The answer streams to stdout,
 * each child's progress as a line of its own; the session stays in the root
 * for `dsh show`/`dsh agents`. Ctrl-C ends the turn `interrupted` (closed and
 * flushed; a second Ctrl-C quits at once). `--resume ID` loads the session
 * (crash repair closes a turn a killed run left open) and runs the next turn,
 * with the prompt when one is given.
 *
 * The API key comes from DSH_API_KEY or OPENAI_API_KEY only (never a flag:
 * flags show in `ps`).
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const prompt = command.args.join(' ').trim()
  const resume = command.string('resume')
  if (prompt.length === 0 && resume === undefined)
    throw new CliError('CLI_USAGE', `'dsh run' needs a prompt: dsh run "what to do" (or --resume ID to continue a session).`)
  const model = command.string('model')
  const baseURL = command.string('base-url')
  // Configuration errors (no key, a bad URL) surface before the root is touched.
  const client = createModelClient({
    env: io.env,
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
  })
  const printer = new RunPrinter(io, command.json)
  const driver = createOpenAIDriver({ client, onEvent: (child, event) => printer.child(child, event) })
  // Children get the control tools too (narrowed by their toolFilter), so they can delegate in turn.
  const host = await openHost(command, { driver, tools: (_agent, runtime) => controlToolsOf(runtime) })
  let session: Session | undefined
  const controller = new AbortController()
  const interrupt = (): void => {
    if (!command.json) io.err.write('\ndsh: interrupting the turn (Ctrl-C again to quit at once)\n')
    controller.abort()
  }
  try {
    warnIfExposed(host.root, io)
    session = resume === undefined ? host.sessions.create({ cwd: process.cwd() }) : await loadSession(host, resume)
    printer.begin(session, resume !== undefined)
    process.once('SIGINT', interrupt)
    const outcome = await runAgent({
      client,
      session,
      tools: controlToolsOf(host.subagents),
      signal: controller.signal,
      onEvent: (event) => printer.top(event),
      ...(prompt.length === 0 ? {} : { prompt }),
    })
    printer.end(session, outcome)
    return outcome.reason === 'completed' ? 0 : outcome.reason === 'interrupted' ? 130 : 1
  } finally {
    process.off('SIGINT', interrupt)
    // Children still running are drained (their turns close) and everything is flushed.
    await host.dispose()
  }
}

/** The session to continue: live already, or loaded from the root (crash repair closes a turn a killed run left open). */
async function loadSession(host: Host, id: string): Promise<Session> {
  const live = host.sessions.get(id)
  if (live !== undefined) return live
  return host.sessions.restore(await host.persistence.load(SessionId(id)))
}

/** What the terminal shows: the streamed answer, tool calls, and one line per child step; escaped, since all of it is data. */
class RunPrinter {
  readonly #io: CommandIo
  readonly #json: boolean
  #atLineStart = true

  constructor(io: CommandIo, json: boolean) {
    this.#io = io
    this.#json = json
  }

  begin(session: Session, resumed: boolean): void {
    if (this.#json) return
    this.#line(safe`${resumed ? 'resuming' : 'session'} ${session.id}`)
  }

  /** An event of the top-level turn. */
  top(event: SessionEvent): void {
    if (this.#json) return
    const data = event.data as Record<string, unknown>
    if (event.type === 'assistant/chunk') this.#write(escapeStream(String(data.delta)))
    else if (event.type === 'tool/call') this.#line(safe`[tool] ${data.name} ${JSON.stringify(data.arguments)}`)
    else if (event.type === 'tool/result')
      this.#line(safe`[tool ${data.isError === true ? 'error' : 'result'}] ${firstLine(resultText(data.content))}`)
    else if (event.type === 'assistant/error') this.#line(safe`[error] ${data.code}: ${data.message}`)
  }

  /** An event of a child's run (children's text is summarized, not streamed). */
  child(run: SubagentRun, event: SessionEvent): void {
    if (this.#json) return
    const data = event.data as Record<string, unknown>
    const who = run.identity?.label ?? run.session.id
    if (event.type === 'turn/start') this.#line(safe`  [${who}] started (${run.session.id})`)
    else if (event.type === 'tool/call') this.#line(safe`  [${who}] ${data.name}`)
    else if (event.type === 'assistant/message') this.#line(safe`  [${who}] answered: ${firstLine(String(data.text))}`)
    else if (event.type === 'assistant/error') this.#line(safe`  [${who}] error ${data.code}: ${data.message}`)
    else if (event.type === 'turn/end') this.#line(safe`  [${who}] turn ended: ${data.reason}`)
  }

  end(session: Session, outcome: { reason: string; text?: string; error?: unknown }): void {
    if (this.#json) {
      const error = outcome.error as { code?: string; message?: string } | undefined
      printJson(
        {
          session: session.id,
          reason: outcome.reason,
          ...(outcome.text === undefined ? {} : { text: outcome.text }),
          ...(error === undefined ? {} : { error: { code: error.code ?? 'CLI_INTERNAL', message: error.message ?? String(error) } }),
        },
        this.#io.out,
      )
      return
    }
    this.#line(safe`[turn ${outcome.reason}] session ${session.id}: dsh show ${session.id} | dsh agents ${session.id}`)
  }

  #write(text: string): void {
    if (text.length === 0) return
    this.#io.out.write(text)
    this.#atLineStart = text.endsWith('\n')
  }

  #line(text: string): void {
    this.#io.out.write(`${this.#atLineStart ? '' : '\n'}${text}\n`)
    this.#atLineStart = true
  }
}

/** Streamed model text: newlines kept, every other control or bidi character escaped. */
function escapeStream(text: string): string {
  return text.split('\n').map(escapeTerminal).join('\n')
}

function resultText(content: unknown): string {
  if (content !== null && typeof content === 'object' && typeof (content as { text?: unknown }).text === 'string')
    return (content as { text: string }).text
  if (content !== null && typeof content === 'object' && typeof (content as { message?: unknown }).message === 'string') {
    return `${String((content as { code?: unknown }).code)}: ${(content as { message: string }).message}`
  }
  return JSON.stringify(content)
}

function firstLine(text: string, max = 100): string {
  const line = text.split('\n', 1)[0] ?? ''
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}
