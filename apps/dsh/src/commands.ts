import { PAGE_MAX_LIMIT, SEARCH_PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import type { CommandSpec, OptionSpec } from './command.js'

/** `--limit N`: the rows of one page, up to the cap of the command's backend read. */
const limitOf = (rows: string, max: number): OptionSpec => ({ type: 'string', value: 'N', help: `at most N ${rows} (1 to ${max})` })
const cursor: OptionSpec = { type: 'string', value: 'C', help: 'the next page (printed by the previous one)' }
const otlp: OptionSpec = { type: 'string', value: 'URL', help: 'OTLP/HTTP traces endpoint (e.g. http://127.0.0.1:4318/v1/traces)' }
const dialect: OptionSpec = {
  type: 'string',
  value: 'dsh|harness',
  help: "the control tools' form: dsh (default) or harness (subagent {description, prompt}, send_message {subagent_id}, …)",
}

/**
 * Every command: adding one is one entry here plus its module under
 * commands/. Nothing here imports a command's code; `load()` does, when the
 * command runs, so `dsh --help` loads no host, SQLite or zstd.
 */
export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  demo: {
    store: 'flag',
    summary: 'build a demo root and print its catalog live, cold with cache, cold without',
    load: () => import('./commands/demo.js'),
  },
  sessions: {
    store: true,
    summary: 'list sessions',
    options: {
      parent: { type: 'string', value: 'ID', help: 'only the children of session ID' },
      origin: { type: 'string', value: 'subagent', help: 'only sessions of this origin' },
      cwd: { type: 'string', value: 'DIR', help: 'only sessions started in DIR' },
      prices: { type: 'string', value: 'FILE', help: 'a price table for the cost column (default $DSH_PRICES)' },
      limit: limitOf('sessions', PAGE_MAX_LIMIT),
      cursor,
    },
    load: () => import('./commands/sessions.js'),
  },
  show: {
    store: true,
    summary: "a session's header and a page of history",
    args: '<id>',
    options: {
      before: { type: 'string', value: 'SEQ', help: 'events before SEQ (paging backwards)' },
      limit: limitOf('events (with --context: messages)', PAGE_MAX_LIMIT),
      context: { type: 'boolean', help: 'what the model sees now (the compacted context), not the log' },
    },
    load: () => import('./commands/show.js'),
  },
  agents: {
    store: true,
    summary: "a session's subagents, like the list_agents tool",
    args: '<id>',
    options: {
      descendants: { type: 'boolean', help: 'the whole tree, not only direct children' },
      definitions: { type: 'boolean', help: 'instead: the agent definitions (<root>/.dsh/agents, <project>/.dsh/agents); no <id>' },
      project: { type: 'string', value: 'DIR', help: 'with --definitions: the project directory (default: the current directory)' },
      prices: { type: 'string', value: 'FILE', help: "a price table for each child's cost (default $DSH_PRICES)" },
    },
    load: () => import('./commands/agents.js'),
  },
  stats: {
    store: true,
    summary: 'tokens, time and cost of a session, or summed over its subagent tree',
    args: '<id>',
    options: {
      descendants: { type: 'boolean', help: 'sum over every session below it too' },
      prices: { type: 'string', value: 'FILE', help: 'a price table (JSON, USD per million tokens; default $DSH_PRICES)' },
    },
    load: () => import('./commands/stats.js'),
  },
  search: {
    store: true,
    summary: 'full-text search over sessions',
    args: '<text>',
    options: {
      events: { type: 'boolean', help: 'matching events instead of sessions' },
      limit: limitOf('hits', SEARCH_PAGE_MAX_LIMIT),
      cursor,
    },
    load: () => import('./commands/search.js'),
  },
  verify: {
    store: true,
    summary: 'check every log; exits 1 when any is corrupt',
    load: () => import('./commands/verify.js'),
  },
  migrate: {
    store: true,
    summary: 'create or upgrade the schema of a PostgreSQL store (--store or DSH_DATABASE_URL); idempotent',
    options: {
      partitions: { type: 'string', value: 'N', help: 'hash partitions of the per-session tables, chosen once (default 16)' },
    },
    load: () => import('./commands/migrate.js'),
  },
  reindex: {
    summary: 'rebuild the query index (progress bar on a TTY)',
    load: () => import('./commands/reindex.js'),
  },
  openapi: {
    summary: 'the OpenAPI 3.1 document of the HTTP API (what serve answers at /api/openapi.json)',
    options: { out: { type: 'string', value: 'FILE', help: 'write it to FILE (mode 0600) instead of stdout' } },
    load: () => import('./commands/openapi.js'),
  },
  serve: {
    store: true,
    summary: 'HTTP API + web catalog page',
    options: {
      port: { type: 'string', value: 'N', help: 'port (default: any free port)' },
      host: { type: 'string', value: 'ADDR', help: 'interface to bind (default 127.0.0.1)' },
      'token-file': { type: 'string', value: 'FILE', help: 'read the API token from FILE (mode 0600)' },
      token: { type: 'string', value: 'T', help: 'the API token (visible in ps: prefer DSH_TOKEN or --token-file)' },
      model: { type: 'string', value: 'M', help: 'with DSH_API_KEY: the model that writes compaction summaries (POST .../compact)' },
      'base-url': { type: 'string', value: 'URL', help: 'with DSH_API_KEY: its Chat Completions base URL' },
      prices: { type: 'string', value: 'FILE', help: 'a price table for the cost of listings and stats (default $DSH_PRICES)' },
    },
    load: () => import('./commands/serve.js'),
  },
  compact: {
    store: true,
    summary: "summarize a session's older context through a model (appended; the log is never rewritten)",
    args: '<id>',
    options: {
      keep: { type: 'string', value: 'N', help: 'the newest N context messages stay verbatim (default 4)' },
      model: { type: 'string', value: 'M', help: 'model name (default DSH_MODEL, then deepseek-v4-flash)' },
      'base-url': { type: 'string', value: 'URL', help: 'Chat Completions base URL (default DSH_BASE_URL, then DeepSeek)' },
    },
    load: () => import('./commands/compact.js'),
  },
  run: {
    store: true,
    summary: 'run an agent over an OpenAI-compatible or Anthropic API (key from DSH_API_KEY), with the subagent-control tools',
    args: '"<prompt>"',
    options: {
      provider: { type: 'string', value: 'P', help: 'openai (default: Chat Completions/Responses) or anthropic (Messages)' },
      thinking: { type: 'string', value: 'TOKENS', help: "with --provider anthropic: extended thinking's budget_tokens (at least 1024)" },
      model: { type: 'string', value: 'M', help: 'model name (default DSH_MODEL, then deepseek-v4-flash)' },
      'base-url': { type: 'string', value: 'URL', help: 'Chat Completions base URL (default DSH_BASE_URL, then DeepSeek)' },
      resume: { type: 'string', value: 'ID', help: 'continue session ID (closes a turn a killed run left open)' },
      'context-window': { type: 'string', value: 'TOKENS', help: "the model's window: compact before a step at 80% of it" },
      'max-steps': { type: 'string', value: 'N', help: 'model steps one turn may take (default 32)' },
      api: { type: 'string', value: 'API', help: 'chat (default) or responses: the OpenAI API the requests use' },
      image: { type: 'string', value: 'PATH', help: 'attach a png/jpeg/gif/webp image to the prompt (stored beside the session)' },
      prices: { type: 'string', value: 'FILE', help: "a price table for children's cost budgets (default $DSH_PRICES)" },
      dialect,
      otlp,
    },
    load: () => import('./commands/run.js'),
  },
  trace: {
    store: true,
    summary: "export a session's turns, model steps and tool calls as OpenTelemetry spans (OTLP/HTTP)",
    args: '<id>',
    options: {
      otlp,
      descendants: { type: 'boolean', help: 'its whole subagent tree too, joined into its traces' },
      model: { type: 'string', value: 'M', help: 'the model the steps requested, where the log does not name one' },
    },
    load: () => import('./commands/trace.js'),
  },
  mcp: {
    store: true,
    summary: 'Model Context Protocol server on stdio (read tools; control tools with --allow-control)',
    options: {
      'allow-control': { type: 'boolean', help: 'also offer the subagent-control tools (they write to the root)' },
      model: { type: 'string', value: 'M', help: 'with --allow-control and DSH_API_KEY: the model children run on' },
      'base-url': { type: 'string', value: 'URL', help: 'with --allow-control and DSH_API_KEY: the Chat Completions base URL' },
      dialect,
      'max-message-bytes': {
        type: 'string',
        value: 'N',
        help: 'longest message read; a longer one is answered with an error (default 10 MiB)',
      },
      'max-children': { type: 'string', value: 'N', help: 'with --allow-control: subagents one session may have (default 64)' },
      'max-concurrent-runs': { type: 'string', value: 'N', help: 'with --allow-control: child runs going at once (default 8)' },
      prices: {
        type: 'string',
        value: 'FILE',
        help: "a price table for the tools' cost and children's cost budgets (default $DSH_PRICES)",
      },
    },
    load: () => import('./commands/mcp.js'),
  },
  import: {
    summary: 'import a harness v0 session root (--from dsh-v0), incrementally; exits 1 when any session failed',
    args: '<dir>',
    options: {
      from: { type: 'string', value: 'dsh-v0', help: 'the format of <dir> (required)' },
      'dry-run': { type: 'boolean', help: 'report what would be imported, write nothing' },
    },
    load: () => import('./commands/import.js'),
  },
  export: {
    summary: 'write sessions back in the harness v0 format (--to dsh-v0)',
    args: '<id…> <dir>',
    options: {
      to: { type: 'string', value: 'dsh-v0', help: 'the format to write (required)' },
      'pack-chunks': { type: 'boolean', help: 'pack delta runs into *-chunks rows as the harness does' },
      plain: { type: 'boolean', help: 'session.jsonl instead of zstd frames' },
    },
    load: () => import('./commands/export.js'),
  },
}
