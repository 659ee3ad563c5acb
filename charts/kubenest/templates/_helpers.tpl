{{- define "kubenest.labels" -}}
app.kubernetes.io/part-of: kubenest
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "kubenest.selector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/name: {{ .name }}
{{- end }}

{{- define "kubenest.keysSecret" -}}
{{- if .Values.keys.existingSecret }}{{ .Values.keys.existingSecret }}{{ else }}{{ .Release.Name }}-keys{{ end }}
{{- end }}

{{- define "kubenest.postgresSecret" -}}
{{- if .Values.postgres.existingSecret }}{{ .Values.postgres.existingSecret }}{{ else }}{{ .Release.Name }}-postgres{{ end }}
{{- end }}

{{- define "kubenest.adminSecret" -}}
{{- if .Values.apiserver.admin.existingSecret }}{{ .Values.apiserver.admin.existingSecret }}{{ else }}{{ .Release.Name }}-admin{{ end }}
{{- end }}

{{- define "kubenest.hubScheme" -}}
{{- if .Values.hub.insecurePlaintext }}ws{{ else }}wss{{ end }}
{{- end }}

{{/* Every hub replica's address, comma-separated: the controllers and the API server dial each. */}}
{{- define "kubenest.hubUrls" -}}
{{- $urls := list }}
{{- range $i := until (int .Values.hub.replicas) }}
{{- $urls = append $urls (printf "%s://%s-hub-%d.%s-hub-headless.%s.svc:8443/v1/connect" (include "kubenest.hubScheme" $) $.Release.Name $i $.Release.Name $.Release.Namespace) }}
{{- end }}
{{- join "," $urls }}
{{- end }}

{{- define "kubenest.check" -}}
{{- if not (or .Values.postgres.url .Values.postgres.existingSecret) }}
{{- fail "postgres.url or postgres.existingSecret is required" }}
{{- end }}
{{- if not (or .Values.keys.existingSecret (and .Values.keys.signingKey .Values.keys.publicKey .Values.keys.apiSigningKey)) }}
{{- fail "keys.existingSecret, or keys.signingKey, keys.publicKey and keys.apiSigningKey, are required (see values.yaml)" }}
{{- end }}
{{- if not (or .Values.hub.tls.secretName .Values.hub.insecurePlaintext) }}
{{- fail "hub.tls.secretName is required (or hub.insecurePlaintext=true where something else terminates TLS)" }}
{{- end }}
{{- if not .Values.hub.publicUrl }}
{{- fail "hub.publicUrl is required: the address agents dial (wss://host/v1/connect)" }}
{{- end }}
{{- if not (or .Values.apiserver.admin.existingSecret .Values.apiserver.admin.password) }}
{{- fail "apiserver.admin.existingSecret or apiserver.admin.password is required" }}
{{- end }}
{{- end }}

{{/* A program's image: the tag defaults to the chart's appVersion, so one chart version
     installs one release of every program. */}}
{{- define "kubenest.image" -}}
{{- $image := index .root.Values.images .name -}}
{{ $image.repository }}:{{ default .root.Chart.AppVersion $image.tag }}
{{- end }}

{{/* A program's pod labels and annotations: podLabels and podAnnotations, under the labels
     its selector needs (so podLabels can never detach a pod from its workload). */}}
{{- define "kubenest.podMetadata" -}}
labels:
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- include "kubenest.selector" . | nindent 2 }}
{{- with .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Where and at which priority a program's pods run, and the Secrets they pull with. A
     topology spread constraint without a labelSelector spreads the program's own pods. */}}
{{- define "kubenest.scheduling" -}}
{{- $v := .root.Values }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range $v.topologySpreadConstraints }}
  {{- $own := dict "labelSelector" (dict "matchLabels" (include "kubenest.selector" $ | fromYaml)) }}
  - {{- toYaml (merge (deepCopy .) $own) | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The environment every program gets beside its own: the log filter, then extraEnv. */}}
{{- define "kubenest.commonEnv" -}}
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
