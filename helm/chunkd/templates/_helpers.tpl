{{/* Names and labels. */}}
{{- define "chunkd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "chunkd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The built-in Redis: fullname with a suffix, still within 63 characters. */}}
{{- define "chunkd.redis.fullname" -}}
{{- printf "%s-redis" (include "chunkd.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{- define "chunkd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "chunkd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "chunkd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "chunkd.labels" -}}
helm.sh/chart: {{ include "chunkd.chart" . }}
{{ include "chunkd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* chunkd pods carry component=server so the built-in Redis' labels never match them. */}}
{{- define "chunkd.serverSelectorLabels" -}}
{{ include "chunkd.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "chunkd.redis.selectorLabels" -}}
{{ include "chunkd.selectorLabels" . }}
app.kubernetes.io/component: redis
{{- end -}}

{{- define "chunkd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "chunkd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "chunkd.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The headless Service, also the StatefulSet's serviceName (fixed once it exists). */}}
{{- define "chunkd.headlessName" -}}
{{- printf "%s-headless" (include "chunkd.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{/* The label a client pod needs when networkPolicy.allowExternal is false. */}}
{{- define "chunkd.clientLabel" -}}
{{- printf "%s-client" (include "chunkd.fullname" .) -}}
{{- end -}}

{{/* Secrets: the chart's own Secret holds whatever is not in an existing one. */}}
{{- define "chunkd.secretName" -}}
{{- include "chunkd.fullname" . -}}
{{- end -}}

{{/* "true" when the index is a Redis or a Redis Cluster. */}}
{{- define "chunkd.redisIndex" -}}
{{- if has .Values.index.type (list "redis" "redis-cluster") -}}true{{- end -}}
{{- end -}}

{{- define "chunkd.redisPassword.enabled" -}}
{{- if and (include "chunkd.redisIndex" .) (or .Values.index.password .Values.index.existingSecret) -}}true{{- end -}}
{{- end -}}

{{- define "chunkd.redisPassword.secretName" -}}
{{- default (include "chunkd.secretName" .) .Values.index.existingSecret -}}
{{- end -}}

{{- define "chunkd.redisPassword.key" -}}
{{- if .Values.index.existingSecret -}}{{ .Values.index.existingSecretPasswordKey }}{{- else -}}redis-password{{- end -}}
{{- end -}}

{{- define "chunkd.authTokens.secretName" -}}
{{- default (include "chunkd.secretName" .) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "chunkd.authTokens.key" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecretKey }}{{- else -}}auth-tokens{{- end -}}
{{- end -}}

{{/* Whether the chart renders its own Secret at all. */}}
{{- define "chunkd.ownSecret.enabled" -}}
{{- if or (and (include "chunkd.redisPassword.enabled" .) (not .Values.index.existingSecret)) (and .Values.auth.enabled (not .Values.auth.existingSecret)) -}}true{{- end -}}
{{- end -}}

{{/* The tokens file in the agreed format: "TOKEN ns1,ns2" or "TOKEN *". */}}
{{- define "chunkd.authTokens.file" -}}
# chunkd auth tokens: TOKEN namespace[,namespace...] or TOKEN *
{{- range .Values.auth.tokens }}
{{ .token }} {{ join "," .namespaces }}
{{- end }}
{{ end -}}

{{/* The RocksDB index: the volume's mount point, and the database one level
     below it, so that its checkpoints (<database>.checkpoints/) are on the
     volume too and not on the read-only root filesystem. */}}
{{- define "chunkd.rocksdb.mountPath" -}}/var/lib/chunkd{{- end -}}
{{- define "chunkd.rocksdb.path" -}}{{ include "chunkd.rocksdb.mountPath" . }}/index{{- end -}}

{{/* The claim the pod mounts: an existing one, or the StatefulSet's. */}}
{{- define "chunkd.rocksdb.claimName" -}}
{{- default (printf "index-%s-0" (include "chunkd.fullname" .)) .Values.index.rocksdb.persistence.existingClaim -}}
{{- end -}}

{{/* The --index value. */}}
{{- define "chunkd.indexUrl" -}}
{{- if eq .Values.index.type "memory" -}}
memory
{{- else if eq .Values.index.type "rocksdb" -}}
{{- printf "rocksdb://%s?sync=%s" (include "chunkd.rocksdb.path" .) .Values.index.rocksdb.sync -}}
{{- else if eq .Values.index.type "redis" -}}
{{- $address := .Values.index.redis.address -}}
{{- if .Values.builtinRedis.enabled -}}
{{- $address = printf "%s:6379" (include "chunkd.redis.fullname" .) -}}
{{- end -}}
{{- printf "redis://%s/%d" $address (int .Values.index.redis.db) -}}
{{- else -}}
{{- printf "redis-cluster://%s" (join "," .Values.index.redisCluster.nodes) -}}
{{- end -}}
{{- end -}}

{{/* Seconds from the start of the preStop pause until chunkd has surely
     exited: the pause, then --shutdown_grace after SIGTERM, then at most 7 s
     more (docs/operations.md, "Kubernetes: the Helm chart"). */}}
{{- define "chunkd.stopSeconds" -}}
{{- add .Values.preStopSleepSeconds .Values.server.shutdownGraceSeconds 7 -}}
{{- end -}}

{{- define "chunkd.terminationGracePeriodSeconds" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add (include "chunkd.stopSeconds" . | int) 3 -}}
{{- else -}}
{{- .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* Mount points inside the chunkd container. */}}
{{- define "chunkd.configDir" -}}/etc/chunkd/config{{- end -}}
{{- define "chunkd.secretsDir" -}}/etc/chunkd/secrets{{- end -}}
{{- define "chunkd.tlsDir" -}}/etc/chunkd/tls{{- end -}}

{{/* grpc_health_probe arguments for an address; TLS when the server uses it. */}}
{{- define "chunkd.healthProbeArgs" -}}
- -connect-timeout=5s
- -rpc-timeout=5s
{{- if .root.Values.tls.enabled }}
- -tls
- -tls-no-verify
{{- if .root.Values.tls.requireClientCert }}
- -tls-client-cert={{ include "chunkd.tlsDir" .root }}/tls.crt
- -tls-client-key={{ include "chunkd.tlsDir" .root }}/tls.key
{{- end }}
{{- end }}
- -addr={{ .addr }}
- -service={{ .service }}
{{- end -}}

{{/*
Every rule that spans several values, checked at once: the chart fails with
the whole list rather than one problem per attempt.
*/}}
{{- define "chunkd.validateValues" -}}
{{- $errors := list -}}
{{- $v := .Values -}}
{{- $replicas := $v.replicaCount -}}
{{- if $v.autoscaling.enabled -}}{{- $replicas = $v.autoscaling.maxReplicas -}}{{- end -}}
{{- if and (eq $v.index.type "memory") (gt (int $replicas) 1) -}}
{{- $errors = append $errors "index.type=memory keeps one index per pod, so Dedup answers would depend on the pod a stream lands on: use replicaCount 1 without autoscaling, or index.type redis / redis-cluster" -}}
{{- end -}}
{{- if eq $v.index.type "rocksdb" -}}
{{- if $v.autoscaling.enabled -}}
{{- $errors = append $errors "index.type=rocksdb runs exactly one pod (a StatefulSet, which the HorizontalPodAutoscaler does not scale): set autoscaling.enabled=false, or use index.type redis / redis-cluster to scale" -}}
{{- else if gt (int $v.replicaCount) 1 -}}
{{- $errors = append $errors (printf "index.type=rocksdb keeps its database on one pod's volume, which a second pod cannot open: use replicaCount 1 (it is %d), or index.type redis / redis-cluster for more pods" (int $v.replicaCount)) -}}
{{- end -}}
{{- if kindIs "invalid" $v.podSecurityContext.fsGroup -}}
{{- $errors = append $errors "index.type=rocksdb needs podSecurityContext.fsGroup: the volume is writable by chunkd's user only through that group" -}}
{{- end -}}
{{- end -}}
{{- if and (not (include "chunkd.redisIndex" .)) (or $v.index.password $v.index.existingSecret) -}}
{{- $errors = append $errors (printf "index.password / index.existingSecret are set but index.type is %s, which uses no password" $v.index.type) -}}
{{- end -}}
{{- if eq $v.index.type "redis" -}}
{{- if and $v.builtinRedis.enabled $v.index.redis.address -}}
{{- $errors = append $errors "index.redis.address must be empty when builtinRedis.enabled is true (chunkd then uses the built-in Redis)" -}}
{{- end -}}
{{- if and (not $v.builtinRedis.enabled) (not $v.index.redis.address) -}}
{{- $errors = append $errors "index.type=redis needs index.redis.address (host:port of your Redis) or builtinRedis.enabled=true" -}}
{{- end -}}
{{- else if $v.builtinRedis.enabled -}}
{{- $errors = append $errors (printf "builtinRedis.enabled needs index.type=redis (it is %s)" $v.index.type) -}}
{{- end -}}
{{- if and (eq $v.index.type "redis-cluster") (not $v.index.redisCluster.nodes) -}}
{{- $errors = append $errors "index.type=redis-cluster needs at least one seed node in index.redisCluster.nodes" -}}
{{- end -}}
{{- if and $v.index.password $v.index.existingSecret -}}
{{- $errors = append $errors "set index.password or index.existingSecret, not both" -}}
{{- end -}}
{{- if $v.auth.enabled -}}
{{- if and $v.auth.tokens $v.auth.existingSecret -}}
{{- $errors = append $errors "set auth.tokens or auth.existingSecret, not both" -}}
{{- else if and (not $v.auth.tokens) (not $v.auth.existingSecret) -}}
{{- $errors = append $errors "auth.enabled needs auth.tokens or auth.existingSecret" -}}
{{- end -}}
{{- else if or $v.auth.tokens $v.auth.existingSecret -}}
{{- $errors = append $errors "auth.tokens / auth.existingSecret are set but auth.enabled is false" -}}
{{- end -}}
{{- if and $v.tls.enabled (not $v.tls.existingSecret) -}}
{{- $errors = append $errors "tls.enabled needs tls.existingSecret (a kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- if and $v.tls.requireClientCert (not $v.tls.enabled) -}}
{{- $errors = append $errors "tls.requireClientCert needs tls.enabled" -}}
{{- end -}}
{{- if lt (int $v.server.maxInflightBytes) (int $v.server.maxMessageBytes) -}}
{{- $errors = append $errors (printf "server.maxInflightBytes (%d) must be at least server.maxMessageBytes (%d)" (int $v.server.maxInflightBytes) (int $v.server.maxMessageBytes)) -}}
{{- end -}}
{{- $stopping := include "chunkd.stopSeconds" . | int -}}
{{- if and (not (kindIs "invalid" $v.terminationGracePeriodSeconds)) (lt (int $v.terminationGracePeriodSeconds) $stopping) -}}
{{- $errors = append $errors (printf "terminationGracePeriodSeconds (%d) must be at least preStopSleepSeconds + server.shutdownGraceSeconds + 7 (%d): chunkd may take 7 s past its grace to stop, and would be killed with streams still running" (int $v.terminationGracePeriodSeconds) $stopping) -}}
{{- end -}}
{{- if $v.autoscaling.enabled -}}
{{- if gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas) -}}
{{- $errors = append $errors "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" -}}
{{- end -}}
{{- if and (kindIs "invalid" $v.autoscaling.targetCPUUtilizationPercentage) (kindIs "invalid" $v.autoscaling.targetMemoryUtilizationPercentage) -}}
{{- $errors = append $errors "autoscaling.enabled needs targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" -}}
{{- end -}}
{{- end -}}
{{- if and $v.metrics.serviceMonitor.enabled $v.metrics.podMonitor.enabled -}}
{{- $errors = append $errors "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true: enable one (each scrapes every pod, so every series would be counted twice)" -}}
{{- end -}}
{{- if and (or $v.metrics.serviceMonitor.enabled $v.metrics.podMonitor.enabled $v.metrics.prometheusRule.enabled) (not $v.metrics.enabled) -}}
{{- $errors = append $errors "metrics.serviceMonitor, metrics.podMonitor and metrics.prometheusRule need metrics.enabled (the metrics port they scrape and alert on)" -}}
{{- end -}}
{{- if $v.podDisruptionBudget.enabled -}}
{{- $min := not (kindIs "invalid" $v.podDisruptionBudget.minAvailable) -}}
{{- $max := not (kindIs "invalid" $v.podDisruptionBudget.maxUnavailable) -}}
{{- if eq $min $max -}}
{{- $errors = append $errors "podDisruptionBudget needs exactly one of minAvailable and maxUnavailable" -}}
{{- end -}}
{{- end -}}
{{- if $errors -}}
{{- fail (printf "\n\nchunkd: invalid values:\n  - %s\n" (join "\n  - " $errors)) -}}
{{- end -}}
{{- end -}}
