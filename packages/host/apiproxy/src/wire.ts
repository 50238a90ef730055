// Service values become wire bodies through `@dsh/protocol/bodies`, the one
// mapping the HTTP host, the CLI's `--json` and the MCP server share: each
// builder copies the declared fields only (a backend's internal fields never
// reach the wire) and is typed by the protocol's inferred body type.

export { capHistoryPage, wireEventSearch, wireHistory, wireSessionList, wireSessionSearch, wireSubagentList } from '@dsh/protocol/bodies'
