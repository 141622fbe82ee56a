{{/*
The chunkd pod: spec.template of the Deployment or, with index.type=rocksdb,
of the StatefulSet (docs/operations.md, "The RocksDB index in the chart").
Indented for that place: `template:{{ include "chunkd.podTemplate" . }}`.
*/}}
{{- define "chunkd.podTemplate" }}
    metadata:
      labels:
        {{- include "chunkd.labels" . | nindent 8 }}
        app.kubernetes.io/component: server
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
        checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "chunkd.serviceAccountName" . }}
      automountServiceAccountToken: false
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- range . }}
        - name: {{ . }}
        {{- end }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- $podSecurityContext := deepCopy .Values.podSecurityContext }}
      {{- if and (eq .Values.index.type "rocksdb") (not (hasKey $podSecurityContext "fsGroupChangePolicy")) }}
      {{- /* fsGroup makes the volume writable; without this the kubelet
           would change the group of every file of the database at every
           start. */}}
      {{- $_ := set $podSecurityContext "fsGroupChangePolicy" "OnRootMismatch" }}
      {{- end }}
      securityContext:
        {{- toYaml $podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ include "chunkd.terminationGracePeriodSeconds" . }}
      {{- with .Values.initContainers }}
      initContainers:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: chunkd
          image: {{ include "chunkd.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          command: ["chunkd"]
          args:
            - --flagfile={{ include "chunkd.configDir" . }}/chunkd.flags
            {{- range .Values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- with .Values.extraEnv }}
          env:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: grpc
              containerPort: {{ .Values.service.grpcPort }}
              protocol: TCP
            {{- if .Values.metrics.enabled }}
            - name: metrics
              containerPort: {{ .Values.service.metricsPort }}
              protocol: TCP
            {{- end }}
          {{- /* Kubernetes' native gRPC probe speaks plaintext only; with TLS the
               probes run grpc_health_probe from the image instead. */}}
          {{- $probes := dict "liveness" "" "readiness" .Values.probes.readiness.service "startup" "" }}
          {{- range $kind := list "startup" "liveness" "readiness" }}
          {{- $p := get $.Values.probes $kind }}
          {{- if $p.enabled }}
          {{ $kind }}Probe:
            {{- if $.Values.tls.enabled }}
            exec:
              command:
                - grpc_health_probe
                {{- include "chunkd.healthProbeArgs" (dict "root" $ "addr" (printf "127.0.0.1:%d" (int $.Values.service.grpcPort)) "service" (get $probes $kind)) | nindent 16 }}
            {{- else }}
            grpc:
              port: {{ $.Values.service.grpcPort }}
              service: {{ get $probes $kind | quote }}
            {{- end }}
            periodSeconds: {{ $p.periodSeconds }}
            {{- if hasKey $p "timeoutSeconds" }}
            timeoutSeconds: {{ $p.timeoutSeconds }}
            {{- else }}
            timeoutSeconds: 5
            {{- end }}
            failureThreshold: {{ $p.failureThreshold }}
          {{- end }}
          {{- end }}
          {{- /* Serving on while Services and DNS drop the pod; SIGTERM then
               starts chunkd's drain (docs/operations.md, "Kubernetes: the
               Helm chart"). */}}
          {{- if gt (int .Values.preStopSleepSeconds) 0 }}
          lifecycle:
            preStop:
              exec:
                command: ["sleep", "{{ .Values.preStopSleepSeconds }}"]
          {{- end }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: {{ include "chunkd.configDir" . }}
              readOnly: true
            {{- if or (include "chunkd.redisPassword.enabled" .) .Values.auth.enabled }}
            - name: secrets
              mountPath: {{ include "chunkd.secretsDir" . }}
              readOnly: true
            {{- end }}
            {{- if .Values.tls.enabled }}
            - name: tls
              mountPath: {{ include "chunkd.tlsDir" . }}
              readOnly: true
            {{- end }}
            - name: tmp
              mountPath: /tmp
            {{- if eq .Values.index.type "rocksdb" }}
            - name: index
              mountPath: {{ include "chunkd.rocksdb.mountPath" . }}
            {{- end }}
            {{- with .Values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
        {{- with .Values.sidecars }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "chunkd.fullname" . }}
        {{- if or (include "chunkd.redisPassword.enabled" .) .Values.auth.enabled }}
        - name: secrets
          projected:
            defaultMode: 0440
            sources:
              {{- if include "chunkd.redisPassword.enabled" . }}
              - secret:
                  name: {{ include "chunkd.redisPassword.secretName" . }}
                  items:
                    - key: {{ include "chunkd.redisPassword.key" . }}
                      path: redis-password
              {{- end }}
              {{- if .Values.auth.enabled }}
              - secret:
                  name: {{ include "chunkd.authTokens.secretName" . }}
                  items:
                    - key: {{ include "chunkd.authTokens.key" . }}
                      path: auth-tokens
              {{- end }}
        {{- end }}
        {{- if .Values.tls.enabled }}
        - name: tls
          secret:
            secretName: {{ .Values.tls.existingSecret }}
            defaultMode: 0440
            items:
              - key: tls.crt
                path: tls.crt
              - key: tls.key
                path: tls.key
              {{- if .Values.tls.requireClientCert }}
              - key: ca.crt
                path: ca.crt
              {{- end }}
        {{- end }}
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with and (eq .Values.index.type "rocksdb") .Values.index.rocksdb.persistence.existingClaim }}
        - name: index
          persistentVolumeClaim:
            claimName: {{ . }}
        {{- end }}
        {{- with .Values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- range . }}
        {{- $constraint := deepCopy . }}
        {{- if not (hasKey $constraint "labelSelector") }}
        {{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "chunkd.serverSelectorLabels" $ | fromYaml)) }}
        {{- end }}
        - {{ toYaml $constraint | indent 10 | trim }}
        {{- end }}
      {{- end }}
{{- end -}}
