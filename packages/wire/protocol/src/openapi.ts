// @dsh/protocol/openapi: the OpenAPI 3.1 document of the HTTP API, built from
// the route table and its zod schemas (zod's JSON Schema 2020-12 output, the
// dialect OpenAPI 3.1 uses). A subpath of its own: only the commands and the
// route that publish the document load it.
import { z } from 'zod'
import { compactionResult } from './compaction.js'
import { errorBody } from './error-body.js'
import { openApiDocumentBody } from './openapi-body.js'
import { type ApiRoute, type RouteName, routes } from './routes.js'
import { searchPage } from './search.js'
import { historyPage, sessionListPage } from './session.js'
import { sessionStatsReport } from './stats.js'
import { streamEvent } from './stream.js'
import { subagentList } from './subagents.js'

/** A JSON Schema 2020-12 object, as it stands in the document. */
export type JsonSchema = { readonly [keyword: string]: unknown }

export type OpenApiParameter = {
  readonly name: string
  readonly in: 'path' | 'query'
  readonly required: boolean
  readonly schema: JsonSchema
}

export type OpenApiMediaType = {
  readonly schema: JsonSchema
  /** For `text/event-stream`: the schema of each message read as `{ event, data }` (what OpenAPI 3.2 names `itemSchema`). */
  readonly 'x-dsh-message-schema'?: JsonSchema
}

export type OpenApiResponse = {
  readonly description: string
  readonly content: { readonly [mediaType: string]: OpenApiMediaType }
}

export type OpenApiOperation = {
  readonly operationId: RouteName
  readonly parameters: readonly OpenApiParameter[]
  readonly security: ReadonlyArray<{ readonly [scheme: string]: readonly string[] }>
  readonly responses: { readonly [status: string]: OpenApiResponse }
}

export type OpenApiDocument = {
  readonly openapi: '3.1.0'
  readonly jsonSchemaDialect: typeof JSON_SCHEMA_DIALECT
  readonly info: { readonly title: string; readonly version: string; readonly description: string }
  readonly paths: { readonly [path: string]: { readonly [method: string]: OpenApiOperation } }
  readonly components: {
    readonly schemas: { readonly [name: string]: JsonSchema }
    readonly securitySchemes: { readonly [name: string]: JsonSchema }
  }
}

/** The dialect of every schema in the document. */
export const JSON_SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema'

/** The version the document states in `info.version`: the protocol package's. */
export const API_VERSION = '0.1.0'

/** The statuses the document declares besides 200: every error answer is an `errorBody`. */
export const ERROR_STATUSES = ['4XX', '5XX'] as const

const ERROR_SCHEMA = 'ErrorBody'

/** `/api/sessions/:id/history` → `/api/sessions/{id}/history`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

/**
 * The OpenAPI 3.1 document of every route in `routes`: its path and query
 * parameters (what a caller sends: strings, with the table's bounds), its
 * answer as a named component (what the host sends), its error answers and its
 * authentication. Deterministic: the same table gives the same document.
 */
export function openApiDocument(): OpenApiDocument {
  const names = schemaNames()
  const schemas: Record<string, JsonSchema> = { [ERROR_SCHEMA]: responseSchema(errorBody) }
  const paths: Record<string, Record<string, OpenApiOperation>> = {}
  for (const [name, route] of Object.entries(routes) as Array<[RouteName, ApiRoute]>) {
    const component = names.get(route.response) ?? `${capitalise(name)}Response`
    schemas[component] ??= responseSchema(route.response)
    const path = openApiPath(route.path)
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(name, route, component) }
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: JSON_SCHEMA_DIALECT,
    info: {
      title: 'dsh HTTP API',
      version: API_VERSION,
      description:
        "Sessions, their histories and subagent catalogs, search, and a stream of changes, read from a dsh host; and compaction of a session's model-visible context on demand.",
    },
    paths,
    components: {
      schemas,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'The host token as `Authorization: Bearer <token>`.' },
        queryToken: {
          type: 'apiKey',
          in: 'query',
          name: 'token',
          description: 'The host token as `?token=`, on routes read by callers that cannot set headers (`EventSource`).',
        },
      },
    },
  }
}

function operation(name: RouteName, route: ApiRoute, component: string): OpenApiOperation {
  const ref = { $ref: `#/components/schemas/${component}` }
  const ok: OpenApiResponse =
    route.answer === 'json'
      ? { description: `A ${component}.`, content: { 'application/json': { schema: ref } } }
      : {
          description: `Server-Sent Events; each message's \`event\` and JSON \`data\` form a ${component}.`,
          content: { 'text/event-stream': { schema: { type: 'string' }, 'x-dsh-message-schema': ref } },
        }
  const failed: OpenApiResponse = {
    description: 'A typed error: a stable `code` and a message a person can act on.',
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_SCHEMA}` } } },
  }
  return {
    operationId: name,
    parameters: [...parameters(route.params, 'path'), ...parameters(route.query, 'query')],
    security: route.auth === 'header' ? [{ bearer: [] }] : [{ bearer: [] }, { queryToken: [] }],
    responses: { '200': ok, ...Object.fromEntries(ERROR_STATUSES.map((status) => [status, failed])) },
  }
}

function parameters(shape: z.ZodObject, where: 'path' | 'query'): OpenApiParameter[] {
  return Object.entries(shape.shape).map(([name, schema]) => ({
    name,
    in: where,
    required: where === 'path' || !schema.safeParse(undefined).success,
    // What a caller sends: every value travels as a string.
    schema: jsonSchema(schema, 'input'),
  }))
}

/** What the host sends: the schema's output, undeclared fields stripped (so none are allowed). */
function responseSchema(schema: z.ZodType): JsonSchema {
  return jsonSchema(schema, 'output')
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  // A JSON value (`jsonValue`, a custom check) has no narrower JSON Schema than `{}`: any JSON.
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' })
  return rest
}

/**
 * Component names: each answer schema under its export name, capitalised
 * (`historyPage` → `HistoryPage`), so generated clients read like the
 * package's own types. An answer not listed here is named after its route.
 */
function schemaNames(): Map<unknown, string> {
  const answers = {
    compactionResult,
    errorBody,
    historyPage,
    openApiDocumentBody,
    searchPage,
    sessionListPage,
    sessionStatsReport,
    streamEvent,
    subagentList,
  }
  return new Map(Object.entries(answers).map(([name, schema]) => [schema, capitalise(name)]))
}

function capitalise(name: string): string {
  return `${name.slice(0, 1).toUpperCase()}${name.slice(1)}`
}
